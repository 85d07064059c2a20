// hmcrun's inventory parser (Ansible INI or MPI hostfile) and the placement of ranks on it.
#include <cstddef>
#include <cstdint>

#include "launcher/inventory.h"
#include "launcher/rank_command.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<hmc::Inventory> inventory = hmc::ParseInventory(text, "fuzz");
  if (inventory.ok()) hmc::PlaceRanks(*inventory, 1 + static_cast<int>(size % 64)).IgnoreError();
  hmc::SplitShellWords(text).IgnoreError();
  return 0;
}
