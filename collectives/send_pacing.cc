#include "collectives/send_pacing.h"

#include <algorithm>
#include <numeric>

namespace hmc {

std::vector<uint64_t> PacingRates(double send_bytes_per_s, const std::vector<uint64_t>& bytes_to) {
  std::vector<uint64_t> rates(bytes_to.size(), 0);
  const auto carrying =
      std::count_if(bytes_to.begin(), bytes_to.end(), [](uint64_t b) { return b > 0; });
  if (send_bytes_per_s <= 0 || carrying < 2) return rates;
  const double total = std::accumulate(bytes_to.begin(), bytes_to.end(), 0.0);
  for (size_t i = 0; i < bytes_to.size(); ++i) {
    if (bytes_to[i] == 0) continue;
    rates[i] = std::max<uint64_t>(1, static_cast<uint64_t>(send_bytes_per_s * bytes_to[i] / total));
  }
  return rates;
}

SendPacing::SendPacing(const std::vector<Channel*>& channels, const std::vector<uint64_t>& rates) {
  for (size_t i = 0; i < channels.size() && i < rates.size(); ++i) {
    if (rates[i] == 0 || channels[i] == nullptr) continue;
    channels[i]->SetPacingRate(rates[i]);
    paced_.push_back(channels[i]);
  }
}

SendPacing::~SendPacing() {
  for (Channel* channel : paced_) channel->SetPacingRate(0);
}

}  // namespace hmc
