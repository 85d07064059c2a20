#include "examples/train_cv/fashion_mnist.h"

#include <ATen/ops/from_blob.h>
#include <zlib.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace hmc::examples {
namespace {

// The whole decompressed file.
absl::StatusOr<std::vector<uint8_t>> ReadGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, " (Debian's dataset-fashion-mnist installs it)"));
  }
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  int n;
  while ((n = gzread(file, chunk, sizeof(chunk))) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  int error = Z_OK;
  const std::string message = gzerror(file, &error);  // Copied: gzclose frees it.
  gzclose(file);
  if (n < 0 || (error != Z_OK && error != Z_STREAM_END)) {
    // zlib's message already starts with the path.
    return absl::DataLossError(message.empty() ? absl::StrCat(path, ": read error") : message);
  }
  return bytes;
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// An IDX file's dimensions and payload: magic 0x0000 08 D (unsigned bytes, D dimensions).
absl::StatusOr<std::vector<int64_t>> ParseIdx(const std::vector<uint8_t>& bytes,
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
  absl::StatusOr<std::vector<uint8_t>> images = ReadGzip(images_path);
  if (!images.ok()) return images.status();
  absl::StatusOr<std::vector<uint8_t>> labels = ReadGzip(labels_path);
  if (!labels.ok()) return labels.status();
  size_t image_offset = 0, label_offset = 0;
  absl::StatusOr<std::vector<int64_t>> image_shape =
      ParseIdx(*images, images_path, 3, &image_offset);
  if (!image_shape.ok()) return image_shape.status();
  absl::StatusOr<std::vector<int64_t>> label_shape =
      ParseIdx(*labels, labels_path, 1, &label_offset);
  if (!label_shape.ok()) return label_shape.status();
  const int64_t n = (*image_shape)[0];
  if ((*label_shape)[0] != n || (*image_shape)[1] != 28 || (*image_shape)[2] != 28) {
    return absl::DataLossError(absl::StrFormat("%s: %d labels for %d images of %dx%d", labels_path,
                                               (*label_shape)[0], n, (*image_shape)[1],
                                               (*image_shape)[2]));
  }
  ImageSet set;
  set.images = at::from_blob(images->data() + image_offset, {n, 1, 28, 28}, at::kByte)
                   .to(at::kFloat)
                   .div_(255.0)
                   .sub_(0.2860)  // Fashion-MNIST's pixel mean and deviation.
                   .div_(0.3530);
  set.labels = at::from_blob(labels->data() + label_offset, {n}, at::kByte).to(at::kLong);
  return set;
}

}  // namespace hmc::examples
