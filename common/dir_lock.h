// One process at a time in a directory: an exclusive flock(2) on DIR/.lock, held while the
// DirLock lives. The kernel drops it when the process ends, however it ends (kill -9 included),
// so a crashed run never leaves a stale lock behind. The file holds the holder's pid and host,
// for the message a second process gets.
#pragma once

#include <string>

namespace tern {

class DirLock {
 public:
  // Creates `dir` if missing and takes its lock, or throws tern::Error:
  // "DIR is in use by pid N on HOST (it holds DIR/.lock): <what_to_do>". On a file system
  // without locks (ENOLCK: an NFS mount with nolock) it warns and holds nothing.
  DirLock(const std::string& dir, const std::string& what_to_do);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tern
