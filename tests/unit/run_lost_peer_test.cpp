// Telling a rank that failed because its peer went away from the cause.
#include "core/run/lost_peer.hpp"
#include "tests/unit/catch.hpp"

using air::reports_lost_peer;

TEST_CASE("reports_lost_peer: the communication layers' wording", "[lost_peer]") {
  CHECK(reports_lost_peer({"Traceback (most recent call last):", "    work.wait()",
                           "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
                           "closed by peer [127.0.0.1]:22755"}));
  CHECK(reports_lost_peer({"RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
                           "... Connection reset by peer"}));
  CHECK(reports_lost_peer({"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
                           "remote process exited or there was a network error, NCCL version 2.28.3"}));
  CHECK(reports_lost_peer({"[rank0]:[E] ProcessGroupNCCL.cpp:616] [Rank 0] NCCL communicator was aborted"}));
  CHECK(reports_lost_peer({"torch.distributed.DistNetworkError: failed to recv, got 0 bytes"}));
}

TEST_CASE("reports_lost_peer: a failure of the rank's own is not one", "[lost_peer]") {
  CHECK_FALSE(reports_lost_peer({}));
  CHECK_FALSE(
      reports_lost_peer({"Traceback (most recent call last):", "  File \"train.py\", line 3, in <module>",
                         "ValueError: bad learning rate"}));
  CHECK_FALSE(reports_lost_peer({"torch.OutOfMemoryError: CUDA out of memory."}));
  CHECK_FALSE(reports_lost_peer({"connection closed by peer"})); // the libraries' exact wording only
}
