#ifndef HMC_CORE_TYPED_VALUES_H_
#define HMC_CORE_TYPED_VALUES_H_

#include <cstddef>

#include "core/dtype.h"

namespace hmc {

// Reads or writes element `index` of a typed array as a double (16-bit floats round to nearest
// even; integers truncate). For test references and result checks, not for hot loops.
double LoadAsDouble(const void* data, size_t index, DType dtype);
void StoreFromDouble(void* data, size_t index, DType dtype, double value);

}  // namespace hmc

#endif  // HMC_CORE_TYPED_VALUES_H_
