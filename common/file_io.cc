#include "common/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace tern {
namespace {

void WriteAll(int fd, std::string_view bytes, const std::string& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail("cannot write ", path, ": ", std::strerror(errno), " (is the disk full?)");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void SyncDir(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

void RefuseDirectory(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    Fail(path, " is a directory, not a file; name a file");
}

void RefuseDirectoryOnStdin() {
  struct stat st;
  if (::fstat(STDIN_FILENO, &st) == 0 && S_ISDIR(st.st_mode))
    Fail("standard input is a directory; redirect a file into it (< FILE)");
}

std::string ReadFile(const std::string& path) {
  RefuseDirectory(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail("cannot open ", path, ": ", std::strerror(errno));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) Fail("cannot read ", path);
  return data;
}

void WriteFileAtomic(const std::string& path, std::string_view bytes) {
  RefuseDirectory(path);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) Fail("cannot create ", tmp, ": ", std::strerror(errno));
  try {
    WriteAll(fd, bytes, tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    Fail("cannot finish writing ", tmp, ": ", std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    Fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(errno));
  }
  SyncDir(path);
}

void AppendToFile(const std::string& path, std::string_view bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) Fail("cannot open ", path, " to append: ", std::strerror(errno));
  try {
    WriteAll(fd, bytes, path);  // one write() unless the disk is full or a signal cuts it short
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
}

void ReplaceDirAtomic(const std::string& tmp_dir, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path)) {
    std::string old = path + ".old." + std::to_string(::getpid());
    fs::remove_all(old, ec);
    fs::rename(path, old, ec);
    if (ec) Fail("cannot move ", path, " aside: ", ec.message());
    fs::rename(tmp_dir, path, ec);
    if (ec) {
      fs::rename(old, path);
      Fail("cannot rename ", tmp_dir, " to ", path, ": ", ec.message());
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp_dir, path, ec);
    if (ec) Fail("cannot rename ", tmp_dir, " to ", path, ": ", ec.message());
  }
  SyncDir(path);
}

bool FileExists(const std::string& path) { return std::filesystem::exists(path); }

void MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) Fail("cannot create directory ", path, ": ", ec.message());
}

void RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  RefuseDirectory(path);
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) Fail("cannot open ", path, ": ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    Fail("cannot stat ", path, ": ", std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      Fail("cannot memory-map ", path, ": ", std::strerror(errno));
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace tern
