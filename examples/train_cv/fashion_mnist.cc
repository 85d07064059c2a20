#include "examples/train_cv/fashion_mnist.h"

#include <ATen/ops/empty.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hmc::examples {
namespace {

// The uncompressed size that a gzip file's trailer records (modulo 2^32; 0 where unreadable).
size_t GzipSizeHint(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return 0;
  uint8_t le[4] = {};
  const bool read = std::fseek(file, -4, SEEK_END) == 0 && std::fread(le, 1, 4, file) == 4;
  std::fclose(file);
  return read ? (size_t{le[3]} << 24 | size_t{le[2]} << 16 | size_t{le[1]} << 8 | le[0]) : 0;
}

// The whole decompressed file, as a tensor of bytes: read straight into its memory, which is
// sized from the trailer and grows if that was short (the training images are 47 MB).
absl::StatusOr<at::Tensor> ReadGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, " (Debian's dataset-fashion-mnist installs it)"));
  }
  // One byte more than the data, so that the read that finds its end needs no growth.
  at::Tensor bytes =
      at::empty({std::clamp<int64_t>(GzipSizeHint(path) + 1, 1 << 20, 256 << 20)}, at::kByte);
  int64_t size = 0;
  int n;
  while ((n = gzread(file, bytes.data_ptr<uint8_t>() + size,
                     static_cast<unsigned>(bytes.numel() - size))) > 0) {
    size += n;
    if (size < bytes.numel()) continue;
    at::Tensor larger = at::empty({2 * size}, at::kByte);
    larger.narrow(0, 0, size).copy_(bytes);
    bytes = larger;
  }
  int error = Z_OK;
  const std::string message = gzerror(file, &error);  // Copied: gzclose frees it.
  gzclose(file);
  if (n < 0 || (error != Z_OK && error != Z_STREAM_END)) {
    // zlib's message already starts with the path.
    return absl::DataLossError(message.empty() ? absl::StrCat(path, ": read error") : message);
  }
  return bytes.narrow(0, 0, size);
}

std::span<const uint8_t> BytesOf(const at::Tensor& bytes) {
  return {bytes.data_ptr<uint8_t>(), static_cast<size_t>(bytes.numel())};
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// An IDX file's dimensions and payload: magic 0x0000 08 D (unsigned bytes, D dimensions).
absl::StatusOr<std::vector<int64_t>> ParseIdx(std::span<const uint8_t> bytes,
                                              const std::string& path, int dimensions,
                                              size_t* payload_offset) {
  const size_t header = 4 + 4 * static_cast<size_t>(dimensions);
  if (bytes.size() < 4) return absl::DataLossError(absl::StrCat(path, ": truncated header"));
  const uint32_t magic = BigEndian32(bytes.data());
  if (magic != (0x800u | static_cast<uint32_t>(dimensions))) {
    return absl::DataLossError(absl::StrFormat(
        "%s: magic 0x%08x, expected 0x%08x (IDX of unsigned bytes with %d dimensions)", path, magic,
        0x800u | dimensions, dimensions));
  }
  if (bytes.size() < header) return absl::DataLossError(absl::StrCat(path, ": truncated header"));
  std::vector<int64_t> shape;
  size_t total = 1;
  for (int d = 0; d < dimensions; ++d) {
    shape.push_back(BigEndian32(bytes.data() + 4 + 4 * d));
    total *= static_cast<size_t>(shape.back());
  }
  if (bytes.size() != header + total) {
    return absl::DataLossError(absl::StrFormat("%s: %zu bytes of data, the header promises %zu",
                                               path, bytes.size() - header, total));
  }
  *payload_offset = header;
  return shape;
}

}  // namespace

absl::StatusOr<ImageSet> LoadFashionMnist(const std::string& dir, bool train) {
  const std::string prefix = absl::StrCat(dir, "/", train ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  absl::StatusOr<at::Tensor> images = ReadGzip(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<at::Tensor> labels = ReadGzip(labels_path);
  if (!labels.ok()) return labels.status();
  size_t image_offset = 0, label_offset = 0;
  absl::StatusOr<std::vector<int64_t>> image_shape =
      ParseIdx(BytesOf(*images), images_path, 3, &image_offset);
  if (!image_shape.ok()) return image_shape.status();
  absl::StatusOr<std::vector<int64_t>> label_shape =
      ParseIdx(BytesOf(*labels), labels_path, 1, &label_offset);
  if (!label_shape.ok()) return label_shape.status();
  const int64_t n = (*image_shape)[0];
  if ((*label_shape)[0] != n || (*image_shape)[1] != 28 || (*image_shape)[2] != 28) {
    return absl::DataLossError(absl::StrFormat("%s: %d labels for %d images of %dx%d", labels_path,
                                               (*label_shape)[0], n, (*image_shape)[1],
                                               (*image_shape)[2]));
  }
  ImageSet set;
  set.images =
      images->narrow(0, static_cast<int64_t>(image_offset), n * 28 * 28).view({n, 1, 28, 28});
  set.labels = labels->narrow(0, static_cast<int64_t>(label_offset), n).to(at::kLong);
  return set;
}

at::Tensor Normalize(const at::Tensor& pixels) {
  return pixels.to(at::kFloat)
      .div_(255.0)
      .sub_(0.2860)  // Fashion-MNIST's pixel mean and deviation.
      .div_(0.3530);
}

}  // namespace hmc::examples
