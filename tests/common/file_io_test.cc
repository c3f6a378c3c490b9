#include "common/file_io.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

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

// Issue 38, 13: a directory given as a model, vocabulary, reference or config read as an empty
// file, failed to map ("No such device") or escaped as "internal error".
TEST(FileIoTest, ADirectoryWhereAFileIsWantedIsNamed) {
  const std::string dir = ::testing::TempDir() + "/file_io_test_dir";
  MakeDirs(dir);
  auto expect_named = [&](const std::function<void()>& f) {
    try {
      f();
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), dir + " is a directory, not a file; name a file");
    }
  };
  expect_named([&] { ReadFile(dir); });
  expect_named([&] { MappedFile map(dir); });
  expect_named([&] { WriteFileAtomic(dir, "x"); });
  RemoveAll(dir);
}

TEST(ChecksumTest, KnownCrc32) {
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // the standard check value
  EXPECT_NE(Fingerprint64("a"), Fingerprint64("b"));
}

}  // namespace
}  // namespace tern
