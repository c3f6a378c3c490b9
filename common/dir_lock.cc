#include "common/dir_lock.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/file_io.h"

namespace tern {
namespace {

// What the holder wrote: "pid N on HOST", or a plainer phrase when it has not written yet.
std::string Holder(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "another process";
  std::string text(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "another process" : text;
}

}  // namespace

DirLock::DirLock(const std::string& dir, const std::string& what_to_do) {
  MakeDirs(dir);
  const std::string path = dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) Fail("cannot open ", path, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = Holder(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      Fail(dir, " is in use by ", holder, " (it holds ", path, "): ", what_to_do);
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
      // A file system without locks (an NFS mount with nolock): go on unguarded, and say so.
      LOG(WARNING) << "cannot lock " << path << " (" << std::strerror(err)
                   << "): nothing stops a second process from using " << dir << " at once";
      return;
    }
    Fail("cannot lock ", path, ": ", std::strerror(err));
  }
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  const std::string me = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) < 0)
    return;  // best effort: the lock is what counts, the text only names its holder
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor drops the lock
}

}  // namespace tern
