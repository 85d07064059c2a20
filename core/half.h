#ifndef HMC_CORE_HALF_H_
#define HMC_CORE_HALF_H_

#include <cstdint>

namespace hmc {

// IEEE 754 binary16 and bfloat16 stored as raw bits. Conversions from float round to nearest even,
// keep NaN a NaN (quiet), and overflow to infinity, as CUDA's __float2half_rn and
// __float2bfloat16_rn do.
struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

float HalfToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);
float BFloat16ToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);

}  // namespace hmc

#endif  // HMC_CORE_HALF_H_
