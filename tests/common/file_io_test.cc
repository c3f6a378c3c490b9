#include "common/file_io.h"

#include <gtest/gtest.h>

#include "common/checksum.h"
#include "common/error.h"

namespace tern {
namespace {

TEST(FileIoTest, AtomicWriteReplacesWholeFile) {
  std::string dir = ::testing::TempDir() + "/tern_file_io";
  MakeDirs(dir);
  std::string path = dir + "/a.bin";
  WriteFileAtomic(path, "first");
  WriteFileAtomic(path, "second version");
  EXPECT_EQ(ReadFile(path), "second version");
  MappedFile map(path);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(map.data()), map.size()), "second version");
}

TEST(FileIoTest, MissingFileIsAUserError) {
  EXPECT_THROW(ReadFile("/nonexistent/tern/file"), Error);
  EXPECT_THROW(MappedFile("/nonexistent/tern/file"), Error);
}

TEST(ChecksumTest, KnownCrc32) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the standard check value
  EXPECT_NE(Fingerprint64("a"), Fingerprint64("b"));
}

}  // namespace
}  // namespace tern
