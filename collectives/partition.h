#ifndef HMC_COLLECTIVES_PARTITION_H_
#define HMC_COLLECTIVES_PARTITION_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace hmc {

// A contiguous range of elements.
struct Range {
  size_t begin = 0;
  size_t count = 0;
  size_t end() const { return begin + count; }
};

// Splits `count` elements into `parts` nearly equal blocks (the first count % parts get one more).
inline Range BlockOf(size_t count, int parts, int index) {
  const size_t base = count / parts;
  const size_t extra = count % parts;
  const size_t i = static_cast<size_t>(index);
  return Range{i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

// Splits a range into pipeline segments of at most `segment` elements (none for an empty range).
inline std::vector<Range> Segments(Range range, size_t segment) {
  std::vector<Range> out;
  for (size_t at = 0; at < range.count; at += segment) {
    out.push_back(Range{range.begin + at, std::min(segment, range.count - at)});
  }
  return out;
}

}  // namespace hmc

#endif  // HMC_COLLECTIVES_PARTITION_H_
