#include "core/os/proc_events.hpp"

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace air {

namespace {
// The event codes are kernel ABI; older headers nest their enum inside
// struct proc_event and newer ones (Linux 6.6) move it out, so neither
// spelling builds everywhere: name the two values here.
constexpr unsigned k_proc_event_fork = 0x00000001U;
constexpr unsigned k_proc_event_exit = 0x80000000U;
} // namespace

UniqueFd open_proc_events() {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_CONNECTOR));
  if (!fd) return {};
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  addr.nl_groups = CN_IDX_PROC;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return {};
  // Bursts of forks (a DataLoader starting its workers on every rank) must
  // not overflow it; FORCE passes the system's limit where we may.
  const int size = 4 << 20;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
    ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));

  // nlmsghdr, cn_msg, then the operation, back to back (cn_msg ends in a
  // flexible array, so no struct holds all three).
  alignas(nlmsghdr) char request[NLMSG_SPACE(sizeof(cn_msg) + sizeof(proc_cn_mcast_op))] = {};
  auto* header = reinterpret_cast<nlmsghdr*>(request);
  header->nlmsg_len = NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_cn_mcast_op));
  header->nlmsg_type = NLMSG_DONE;
  auto* message = static_cast<cn_msg*>(NLMSG_DATA(header));
  message->id.idx = CN_IDX_PROC;
  message->id.val = CN_VAL_PROC;
  message->len = sizeof(proc_cn_mcast_op);
  const proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
  std::memcpy(message->data, &op, sizeof(op));
  ssize_t n;
  do {
    n = ::send(fd.get(), request, header->nlmsg_len, 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(header->nlmsg_len)) return {};
  return fd;
}

bool read_proc_events(int fd, const ProcEventHandlers& handlers) {
  bool complete = true;
  alignas(nlmsghdr) char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        complete = false; // the kernel dropped events; what follows is still good
        continue;
      }
      return complete; // EAGAIN: all read
    }
    if (n == 0) return complete;
    auto left = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_NOOP) continue;
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(cn_msg) + sizeof(proc_event))) continue;
      const auto* msg = static_cast<const cn_msg*>(NLMSG_DATA(h));
      if (msg->id.idx != CN_IDX_PROC || msg->id.val != CN_VAL_PROC) continue;
      proc_event event;
      std::memcpy(&event, msg->data, sizeof(event));
      if (static_cast<unsigned>(event.what) == k_proc_event_fork) {
        const auto& f = event.event_data.fork;
        if (f.child_pid == f.child_tgid && handlers.process_forked) // a thread is no new process
          handlers.process_forked(f.parent_tgid, f.child_tgid);
      } else if (static_cast<unsigned>(event.what) == k_proc_event_exit) {
        const auto& e = event.event_data.exit;
        if (e.process_pid == e.process_tgid && handlers.process_exited)
          handlers.process_exited(e.process_tgid);
      }
    }
  }
}

} // namespace air
