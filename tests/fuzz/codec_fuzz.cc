// Every codec's decoder on bytes from the wire: a length or header that does not fit is an error,
// never a read or write outside the buffers.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/codecs/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::unique_ptr<hmc::Codec>>* codecs = [] {
    auto* all = new std::vector<std::unique_ptr<hmc::Codec>>();
    for (const std::string& spec : hmc::DefaultCodecSpecs()) all->push_back(*hmc::MakeCodec(spec));
    for (const char* spec : {"int8:block=7", "topk:ratio=0.5", "powersgd:rank=3"}) {
      all->push_back(*hmc::MakeCodec(spec));
    }
    return all;
  }();
  if (size < 3) return 0;
  // Two bytes choose the codec and the value count; the rest is the encoding.
  const hmc::Codec& codec = *(*codecs)[data[0] % codecs->size()];
  const size_t count = data[1] * 7 + 1;
  std::vector<float> out(count);
  // An exact-size copy, so that ASan sees any read past the encoding's end.
  const std::vector<uint8_t> encoded(data + 2, data + size);
  codec.Decode(encoded.data(), encoded.size(), out.data(), count).IgnoreError();
  return 0;
}
