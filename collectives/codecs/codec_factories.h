#ifndef HMC_COLLECTIVES_CODECS_CODEC_FACTORIES_H_
#define HMC_COLLECTIVES_CODECS_CODEC_FACTORIES_H_

// The concrete codecs, each defined in its own file; MakeCodec (codec.cc) parses a spec into one.
#include <memory>

#include "collectives/codecs/codec.h"

namespace hmc {

std::unique_ptr<Codec> MakeNoneCodec();
std::unique_ptr<Codec> MakeFp16Codec();
std::unique_ptr<Codec> MakeBf16Codec();
std::unique_ptr<Codec> MakeInt8BlockCodec(size_t block);
std::unique_ptr<Codec> MakeUniform8Codec();
std::unique_ptr<Codec> MakeQuantile8Codec();
std::unique_ptr<Codec> MakeTopKCodec(double ratio);
std::unique_ptr<Codec> MakePowerSgdCodec(int rank);

}  // namespace hmc

#endif  // HMC_COLLECTIVES_CODECS_CODEC_FACTORIES_H_
