#include "common/dir_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "common/error.h"
#include "common/file_io.h"

namespace tern {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/tern_dir_lock_" + name;
  RemoveAll(dir);
  return dir;
}

TEST(DirLockTest, ASecondHolderIsRefusedNamingTheFirst) {
  const std::string dir = FreshDir("second");
  DirLock first(dir, "stop it");  // creates the directory
  try {
    DirLock second(dir, "stop it, or use another directory");
    FAIL() << "a second lock on " << dir << " was taken";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(dir + " is in use by pid " + std::to_string(::getpid()) + " on ", 0),
              0u)
        << message;
    EXPECT_NE(message.find("(it holds " + dir + "/.lock): stop it, or use another directory"),
              std::string::npos)
        << message;
  }
}

TEST(DirLockTest, ItIsFreeOnceTheHolderIsGone) {
  const std::string dir = FreshDir("released");
  { DirLock held(dir, ""); }
  EXPECT_NO_THROW(DirLock again(dir, ""));
  // A holder that dies without cleaning up (kill -9) leaves no stale lock. The child takes it
  // as DirLock does, with system calls only (it is a fork of a threaded process).
  const std::string path = dir + "/.lock";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ::_exit(fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);  // no destructor runs
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_NO_THROW(DirLock after(dir, ""));
}

}  // namespace
}  // namespace tern
