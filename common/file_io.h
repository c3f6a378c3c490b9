// File I/O: whole-file reads, atomic writes (temporary name + fsync + rename, so a crash leaves the
// previous file whole) and read-only memory maps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tern {

// Reads a whole file; throws tern::Error naming the path when it cannot (or it is a directory).
std::string ReadFile(const std::string& path);

// Writes `bytes` to `path` atomically: to `path.tmp.<pid>`, fsync, rename over `path`, fsync dir.
void WriteFileAtomic(const std::string& path, std::string_view bytes);

// Appends `bytes` to `path` (created if missing) with one write to a file opened O_APPEND, so
// writers of whole lines never interleave within a line and a crash leaves no half line on a
// local file system.
void AppendToFile(const std::string& path, std::string_view bytes);

// Renames a finished directory over `path` atomically (the old one, if any, is removed after).
void ReplaceDirAtomic(const std::string& tmp_dir, const std::string& path);

bool FileExists(const std::string& path);
// tern::Error naming `path` when it is a directory where a file is wanted (a common slip: the
// model directory for the model file). ReadFile, WriteFileAtomic and MappedFile check it.
void RefuseDirectory(const std::string& path);
// tern::Error when the program's standard input is a directory (`program < some/dir`), which
// would otherwise read as empty.
void RefuseDirectoryOnStdin();
void MakeDirs(const std::string& path);
void RemoveAll(const std::string& path);

// A read-only memory map of a whole file. Not copyable.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tern
