#include "core/stream_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "core/socket.h"

namespace hmc {
namespace {

constexpr size_t kAhead = BufferedSocketIo::kReadAheadBytes;

// A connected pair: `reader` non-blocking, as a channel's streams are.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    reader = UniqueFd(fds[0]);
    writer = UniqueFd(fds[1]);
    EXPECT_EQ(fcntl(reader.get(), F_SETFL, fcntl(reader.get(), F_GETFL) | O_NONBLOCK), 0);
  }
  // Bytes numbered from `first` on (mod 251, so that a shift shows).
  void Write(size_t first, size_t bytes) {
    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>((first + i) % 251);
    ASSERT_EQ(write(writer.get(), data.data(), bytes), static_cast<ssize_t>(bytes));
  }
  // What the socket holds, not yet read.
  int Unread() const {
    int bytes = -1;
    EXPECT_EQ(ioctl(reader.get(), FIONREAD, &bytes), 0);
    return bytes;
  }
  UniqueFd reader;
  UniqueFd writer;
};

// Reads `bytes` and expects them to be bytes `first`... of Pair::Write's numbering.
void ExpectRead(StreamIo& io, size_t first, size_t bytes) {
  std::vector<uint8_t> got(bytes);
  const IoResult r = io.Read(got.data(), bytes);
  ASSERT_EQ(r.kind, IoResult::kDone) << r.error;
  ASSERT_EQ(r.bytes, bytes);
  for (size_t i = 0; i < bytes; ++i) {
    ASSERT_EQ(got[i], static_cast<uint8_t>((first + i) % 251)) << "byte " << first + i;
  }
}

IoResult::Kind ReadKind(StreamIo& io) {
  uint8_t byte;
  return io.Read(&byte, 1).kind;
}

TEST(BufferedSocketIo, SmallReadsShareOneReadAheadAndKeepTheBytesInOrder) {
  Pair pair;
  BufferedSocketIo io(pair.reader.get());
  pair.Write(0, 5000);
  ExpectRead(io, 0, 40);
  EXPECT_EQ(pair.Unread(), 0);  // The first read took all of it from the socket.
  EXPECT_TRUE(io.buffered());
  ExpectRead(io, 40, 1000);
  ExpectRead(io, 1040, 16);
  ExpectRead(io, 1056, 3944);
  EXPECT_FALSE(io.buffered());
}

TEST(BufferedSocketIo, AReadAheadThatEmptiedTheSocketSparesTheNextRecvOnly) {
  Pair pair;
  BufferedSocketIo io(pair.reader.get());
  pair.Write(0, 100);
  ExpectRead(io, 0, 100);
  pair.Write(100, 50);
  // The socket holds 50 bytes, but the last read ahead found it empty: the socket will signal
  // them, and the read that would have said EAGAIN is not made.
  EXPECT_EQ(ReadKind(io), IoResult::kWouldBlock);
  EXPECT_EQ(pair.Unread(), 50);
  ExpectRead(io, 100, 40);
  ExpectRead(io, 140, 10);
}

TEST(BufferedSocketIo, LargeReadsGoStraightToTheirDestinationAfterWhatWasReadAhead) {
  Pair pair;
  BufferedSocketIo io(pair.reader.get());
  const size_t payload = 2 * kAhead + 123;
  pair.Write(0, 40 + payload);
  ExpectRead(io, 0, 40);  // Reads ahead a whole buffer: the socket still holds the rest.
  EXPECT_EQ(pair.Unread(), static_cast<int>(40 + payload - kAhead));
  ExpectRead(io, 40, kAhead - 40);  // The rest of the buffer.
  ExpectRead(io, kAhead, payload + 40 - kAhead);
  EXPECT_EQ(ReadKind(io), IoResult::kWouldBlock);  // Asked: a full read ahead said nothing.
}

TEST(BufferedSocketIo, APeerThatClosedIsSeenAfterItsLastBytes) {
  Pair pair;
  BufferedSocketIo io(pair.reader.get());
  pair.Write(0, 10);
  pair.writer.Reset();
  ExpectRead(io, 0, 4);
  ExpectRead(io, 4, 6);
  EXPECT_EQ(ReadKind(io), IoResult::kWouldBlock);
  EXPECT_EQ(ReadKind(io), IoResult::kClosed);
}

}  // namespace
}  // namespace hmc
