// A client that disconnects while its translation runs gets its sentences cancelled. cpp-httplib
// 0.11 (Debian 12's) hands a handler no socket and no way to learn that the peer left, so the
// handler finds its connection among the process's descriptors by the two addresses httplib
// does give (Request::local_addr/local_port/remote_addr/remote_port), and polls it for the
// peer's close. The descriptor stays the handler's while it runs: httplib closes it only after.
#pragma once

#include <string>

namespace tern::serve {

// The connected TCP socket with these ends, or -1 when none is found. Caches the last answer
// per thread (a keep-alive connection's requests run on one thread), checked before it is used.
int FindPeerSocket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                   int remote_port);

// True when the peer has closed its side (FIN, RST or an error): poll with POLLRDHUP, no wait.
// A client that only shuts down its sending side while it waits counts as gone too.
bool PeerClosed(int fd);

}  // namespace tern::serve
