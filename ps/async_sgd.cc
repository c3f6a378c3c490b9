// Asynchronous SGD over the sharded parameter server (see async_sgd.h).
#include "ps/async_sgd.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "common/error.h"
#include "common/thread_pool.h"
#include "optim/clip.h"
#include "ps/protocol.h"

namespace tern::ps {

using protocol::kTagReply;
using protocol::kTagRequest;

AsyncSgd::AsyncSgd(const StrategyOptions& options, const config::OptimConfig& optim,
                   comm::Communicator* comm, int64_t num_params)
    : options_(options), comm_(comm), map_(num_params, comm->size()), rank_(comm->rank()) {
  CHECK_GE(options_.tau, 1);
  const ShardRange& mine = map_.range(rank_);
  shard_ = std::make_unique<Shard>(mine, MakeShardOptimizer(options_, optim, mine.size()),
                                   options_.shard_device);
  if (options_.local_sgd) {
    local_ = std::make_unique<LocalWarmup>(optim, num_params, INT64_MAX);
  } else if (options_.local_optimizer_updates > 0) {
    local_ = std::make_unique<LocalWarmup>(optim, num_params, options_.local_optimizer_updates);
  }
  if (options_.drop_rate > 0) {
    dropper_ = std::make_unique<GradientDropper>(num_params, options_.drop_rate,
                                                 options_.seed + static_cast<uint64_t>(rank_));
  }
  CHECK(!options_.drop_pulls || dropper_ != nullptr) << "dropped pulls without gradient dropping";
  if (options_.drop_pulls) {
    pull_dropper_ = std::make_unique<PullDropper>(mine.size(), comm->size(), options_.drop_rate,
                                                  PullDropSeed(options_.seed, rank_));
  }
  accum_.assign(num_params, 0.f);
  outgoing_.assign(num_params, 0.f);
  fresh_.assign(num_params, 0.f);
  params_versions_.assign(map_.num_shards(), 0);
  group_base_versions_.assign(map_.num_shards(), 0);
  reply_buffers_.resize(comm->size());
  reply_busy_.assign(comm->size(), false);
  fresh_versions_.assign(map_.num_shards(), 0);
}

AsyncSgd::~AsyncSgd() {
  try {
    Finish();
  } catch (const std::exception& e) {
    LOG(ERROR) << "async SGD shutdown: " << e.what();
  }
}

void AsyncSgd::Init(const Tensor& params) {
  CHECK(!initialized_) << "Init called twice";
  CHECK_EQ(params.numel(), map_.num_params());
  comm_->Broadcast(params.raw(), params.bytes(), 0);
  shard_->Init(params.f32() + map_.range(rank_).begin);
  if (pull_dropper_ != nullptr) pull_dropper_->Init(params.f32() + map_.range(rank_).begin);
  std::memcpy(fresh_.data(), params.f32(), params.bytes());
  server_thread_ = std::thread([this] { ServerLoop(); });
  reply_thread_ = std::thread([this] { ReplyLoop(); });
  if (options_.overlap) comm_thread_ = std::thread([this] { CommLoop(); });
  initialized_ = true;
}

StepResult AsyncSgd::Step(const Tensor& grads, const Tensor& params, const StepInfo& info) {
  CHECK(initialized_ && !finished_) << "Step outside Init..Finish";
  const int64_t n = map_.num_params();
  CHECK_EQ(grads.numel(), n);
  CHECK_EQ(params.numel(), n);
  compute_seconds_ = since_step_.Seconds();
  const float* g = grads.f32();
  float* a = accum_.data();
  // The first mini-batch of a group overwrites the accumulator, so it is never cleared. A dense
  // push of a single mini-batch done inline (no overlap) is sent straight from the gradient:
  // nothing overwrites it before the round ends.
  const bool first = accumulated_ == 0;
  if (first) group_base_versions_ = params_versions_;  // what this gradient was computed on
  const bool direct =
      first && options_.tau == 1 && !options_.overlap && dropper_ == nullptr && !options_.local_sgd;
  if (!direct && !options_.local_sgd) {  // local SGD pushes the local steps' change instead
    ParallelFor(n, 1 << 14, [=](int64_t b, int64_t e) {
      if (first) {
        std::memcpy(a + b, g + b, (e - b) * sizeof(float));
      } else {
        for (int64_t i = b; i < e; ++i) a[i] += g[i];
      }
    });
  }
  StepResult result;
  const bool push = ++accumulated_ >= options_.tau;
  result.params_changed = TakeFresh(params, /*wait=*/push);
  if (local_ != nullptr) {
    // Fresh values lack this group's local steps; this mini-batch's step goes on top (the push
    // below carries the same gradients to the global model).
    if (result.params_changed) local_->Reapply(params.f32());
    if (local_->active(info.update)) {
      local_->Step(params, grads,
                   options_.local_sgd ? InnerOptions(info, grads, options_) : info.options);
      result.params_changed = true;
    }
  }
  if (!push) {
    since_step_.Reset();
    return result;
  }
  PushGroup(info, direct ? g : accum_.data(), params.f32(), &result);
  if (!options_.overlap) {
    result.params_changed |= TakeFresh(params, /*wait=*/true);
  } else if (options_.overlap_wait > 0 && WaitRound(options_.overlap_wait * compute_seconds_)) {
    // Back soon: a short wait spares the next gradient a version of staleness.
    result.params_changed |= TakeFresh(params, /*wait=*/false);
  }
  since_step_.Reset();
  return result;
}

void AsyncSgd::Flush(const Tensor& params, const StepInfo& info) {
  CHECK(initialized_ && !finished_);
  TakeFresh(params, /*wait=*/true);
  if (accumulated_ > 0) {
    StepResult ignored;
    PushGroup(info, accum_.data(), params.f32(), &ignored);
    TakeFresh(params, /*wait=*/true);
  }
  StartRound(/*pull_only=*/true, info.options, params.f32());
  TakeFresh(params, /*wait=*/true);
}

void AsyncSgd::Finish() {
  if (!initialized_ || finished_) return;
  finished_ = true;
  WaitRound();
  // After the barrier no rank has a push in flight: each waited for its replies.
  comm_->Barrier();
  std::string stop;
  protocol::EncodeControl(protocol::Kind::kStop, &stop);
  comm_->Send(rank_, kTagRequest, stop);
  server_thread_.join();
  {
    std::lock_guard<std::mutex> lock(reply_mu_);
    stop_replies_ = true;
  }
  reply_ready_.notify_all();
  reply_thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_comm_ = true;
  }
  round_changed_.notify_all();
  if (comm_thread_.joinable()) comm_thread_.join();
}

StrategyStats AsyncSgd::stats() const {
  StrategyStats s;
  s.staleness = shard_->staleness();
  s.pushes = pushes_;
  s.entries_sent = entries_sent_;
  s.entries_total = entries_total_;
  s.bytes_sent = bytes_sent_.load();
  s.bytes_pushed = bytes_pushed_.load();
  s.bytes_pulled = bytes_pulled_.load();
  return s;
}

void AsyncSgd::PushGroup(const StepInfo& info, const float* gradient, float* params,
                         StepResult* result) {
  if (options_.local_sgd) {
    local_->PseudoGradient(accum_.data());
    gradient = accum_.data();
  }
  StartPush(info, accumulated_, gradient, params, result);
  if (local_ != nullptr) local_->GroupPushed();
}

std::string AsyncSgd::SaveWorkerState() const {
  CHECK_EQ(accumulated_, 0) << "SaveWorkerState before Flush";
  if (options_.local_sgd) return EncodeInnerState(local_->SaveOptimizerState());
  if (dropper_ == nullptr) return std::string();
  const std::vector<float>& r = dropper_->residual();
  const uint64_t drops = dropper_->drops();
  std::string out(sizeof(drops) + r.size() * sizeof(float), '\0');
  std::memcpy(out.data(), &drops, sizeof(drops));
  std::memcpy(out.data() + sizeof(drops), r.data(), r.size() * sizeof(float));
  return out;
}

void AsyncSgd::LoadWorkerState(const std::string& bytes) {
  if (options_.local_sgd) {
    local_->LoadOptimizerState(DecodeInnerState(bytes));
    return;
  }
  if (dropper_ == nullptr && bytes.empty()) return;
  const size_t expected = sizeof(uint64_t) + map_.num_params() * sizeof(float);
  if (dropper_ == nullptr || bytes.size() != expected) {
    Fail("worker state: ", bytes.size(), " bytes of gradient-dropping state, expected ",
         dropper_ == nullptr ? 0 : expected,
         " (distributed.drop_rate or the model differ from the checkpoint's)");
  }
  uint64_t drops = 0;
  std::memcpy(&drops, bytes.data(), sizeof(drops));
  std::vector<float> r(map_.num_params());
  std::memcpy(r.data(), bytes.data() + sizeof(drops), r.size() * sizeof(float));
  dropper_->Restore(r, drops);
}

void AsyncSgd::StartPush(const StepInfo& info, int batches, const float* gradient, float* params,
                         StepResult* result) {
  const int64_t n = map_.num_params();
  Tensor accum(const_cast<float*>(gradient), Shape{n});
  const optim::StepOptions o =
      options_.local_sgd
          ? OuterOptions(options_, 1.f)
          : PushOptions(info, batches, options_.clip_norm > 0 ? optim::SquaredNorm(accum) : 0.0,
                        options_);
  job_sparse_ = dropper_ != nullptr && info.update > options_.drop_warmup;
  CHECK(job_sparse_ || dropper_ == nullptr || gradient == accum_.data());
  if (job_sparse_) {
    result->sent_fraction = dropper_->Drop(accum, map_, &outgoing_sparse_);
    for (const SparseGradient& s : outgoing_sparse_) entries_sent_ += s.indices.size();
  } else {
    if (gradient == accum_.data()) {
      outgoing_.swap(accum_);  // the round reads it while the next group accumulates
      gradient = outgoing_.data();
    }
    job_dense_ = gradient;
    result->sent_fraction = 1.f;
    entries_sent_ += n;
  }
  entries_total_ += n;
  accumulated_ = 0;
  ++pushes_;
  result->pushed = true;
  StartRound(/*pull_only=*/false, o, params);
}

void AsyncSgd::StartRound(bool pull_only, const optim::StepOptions& options, float* params) {
  job_pull_only_ = pull_only;
  job_options_ = options;
  job_base_versions_ = group_base_versions_;
  // Inline rounds write the pulled shards straight into the worker's parameters; overlapped
  // ones into fresh_, since the worker computes with its parameters meanwhile. A sparse reply
  // writes only some values: they go where the worker's view of the shards is kept, fresh_.
  job_pull_into_ = options_.overlap || options_.drop_pulls ? fresh_.data() : params;
  std::unique_lock<std::mutex> lock(mu_);
  CHECK(round_ == RoundState::kIdle) << "a round is already running";
  if (options_.overlap) {
    round_ = RoundState::kPending;
    lock.unlock();
    round_changed_.notify_all();
    return;
  }
  round_ = RoundState::kRunning;
  lock.unlock();
  RunRound();
  lock.lock();
  round_ = RoundState::kDone;
}

void AsyncSgd::WaitRound() {
  std::unique_lock<std::mutex> lock(mu_);
  round_changed_.wait(
      lock, [this] { return round_ == RoundState::kIdle || round_ == RoundState::kDone; });
}

bool AsyncSgd::WaitRound(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return round_changed_.wait_for(lock, std::chrono::duration<double>(seconds), [this] {
    return round_ == RoundState::kIdle || round_ == RoundState::kDone;
  });
}

bool AsyncSgd::TakeFresh(const Tensor& params, bool wait) {
  if (wait) WaitRound();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (round_ != RoundState::kDone) return false;
    // Only this (worker) thread starts rounds, so fresh_ stays still after kIdle.
    round_ = RoundState::kIdle;
  }
  if (job_pull_into_ != params.f32()) {
    std::memcpy(params.f32(), fresh_.data(), fresh_.size() * sizeof(float));
  }
  params_versions_ = fresh_versions_;
  return true;
}

void AsyncSgd::CommLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      round_changed_.wait(lock, [this] { return stop_comm_ || round_ == RoundState::kPending; });
      if (stop_comm_) return;
      round_ = RoundState::kRunning;
    }
    RunRound();
    {
      std::lock_guard<std::mutex> lock(mu_);
      round_ = RoundState::kDone;
    }
    round_changed_.notify_all();
  }
}

void AsyncSgd::RunRound() {
  const int shards = map_.num_shards();
  for (int s = 0; s < shards; ++s) {
    if (s == rank_) continue;
    const ShardRange& r = map_.range(s);
    const bool dense = !job_pull_only_ && !job_sparse_;
    if (job_pull_only_) {
      protocol::EncodeControl(protocol::Kind::kPull, &send_buffer_);
    } else if (job_sparse_) {
      protocol::EncodeSparse(job_options_, job_base_versions_[s], outgoing_sparse_[s],
                             &send_buffer_);
    } else {
      protocol::EncodeDense(job_options_, job_base_versions_[s], r.size(), &send_buffer_);
    }
    comm_->Send(s, kTagRequest, send_buffer_);
    int64_t sent = static_cast<int64_t>(send_buffer_.size());
    if (dense) {
      comm_->Send(s, kTagRequest, job_dense_ + r.begin, r.size() * sizeof(float));
      sent += r.size() * static_cast<int64_t>(sizeof(float));
    }
    bytes_sent_ += sent;
    bytes_pushed_ += sent;
  }
  // The own shard meanwhile: no message, same lock as remote pushes.
  const ShardRange& mine = map_.range(rank_);
  float* own = job_pull_into_ + mine.begin;
  if (job_pull_only_) {
    fresh_versions_[rank_] = shard_->Read(own);
  } else if (job_sparse_) {
    fresh_versions_[rank_] =
        shard_->ApplySparse(outgoing_sparse_[rank_], job_options_, job_base_versions_[rank_], own);
  } else {
    fresh_versions_[rank_] =
        shard_->ApplyDense(job_dense_ + mine.begin, job_options_, job_base_versions_[rank_], own);
  }
  for (int k = 0; k < shards - 1; ++k) {
    const int s = comm_->Recv(comm::kAnySource, kTagReply, &reply_buffer_);
    const ShardRange& r = map_.range(s);
    if (reply_buffer_.size() == sizeof(protocol::SparseReplyHeader)) {
      protocol::SparseReplyHeader h;
      std::memcpy(&h, reply_buffer_.data(), sizeof(h));
      fresh_versions_[s] = h.version;
      reply_payload_.clear();
      if (h.count > 0) comm_->Recv(s, kTagReply, &reply_payload_);
      protocol::ApplySparseReplyPayload(reply_payload_, h.count, r.size(),
                                        job_pull_into_ + r.begin);
      bytes_pulled_ += static_cast<int64_t>(sizeof(h) + reply_payload_.size());
      continue;
    }
    CHECK_EQ(reply_buffer_.size(), protocol::kDenseReplyHeaderBytes);
    std::memcpy(&fresh_versions_[s], reply_buffer_.data(), sizeof(uint64_t));
    comm_->RecvInto(s, kTagReply, job_pull_into_ + r.begin, r.size() * sizeof(float));
    bytes_pulled_ += static_cast<int64_t>(sizeof(uint64_t) + r.size() * sizeof(float));
  }
}

void AsyncSgd::ServerLoop() {
  std::string request;
  const int64_t size = shard_->range().size();
  std::vector<float> dense(size);  // (shard) a dense push's gradient
  std::vector<float> updated;  // (shard) with dropped pulls: the values a sparse reply picks from
  SparseGradient picked;
  std::string payload;
  for (;;) {
    const int source = comm_->Recv(comm::kAnySource, kTagRequest, &request);
    const protocol::Request r = protocol::DecodeRequest(request, size);
    if (r.header.kind == protocol::Kind::kStop) {
      CHECK_EQ(source, rank_) << "stop request from another rank";
      return;
    }
    if (r.header.kind == protocol::Kind::kDense) {
      comm_->RecvInto(source, kTagRequest, dense.data(), size * sizeof(float));
    }
    // The source's own reply buffer: it waits for one reply per request before sending another,
    // so the buffer is back (its send complete) by the time the next request arrives.
    std::string reply;
    {
      std::unique_lock<std::mutex> lock(reply_mu_);
      reply_free_.wait(lock, [&] { return !reply_busy_[source]; });
      reply_busy_[source] = true;
      reply.swap(reply_buffers_[source]);
    }
    size_t header = protocol::kDenseReplyHeaderBytes;
    if (pull_dropper_ != nullptr && r.header.kind == protocol::Kind::kSparse) {
      // Dropped pulls: of the updated shard, what this worker's view lacks most.
      updated.resize(size);
      const uint64_t version =
          shard_->ApplySparse(r.sparse, r.options(), r.header.base_version, updated.data());
      pull_dropper_->Select(source, updated.data(), &picked);
      protocol::EncodeSparseReply(version, picked, &reply, &payload);
      header = reply.size();
      reply += payload;
    } else {
      reply.resize(sizeof(uint64_t) + size * sizeof(float));
      // The update writes the fresh values into the reply as it goes (one pass over the shard).
      float* fresh = reinterpret_cast<float*>(reply.data() + sizeof(uint64_t));
      uint64_t version;
      if (r.header.kind == protocol::Kind::kDense) {
        version = shard_->ApplyDense(dense.data(), r.options(), r.header.base_version, fresh);
      } else if (r.header.kind == protocol::Kind::kSparse) {
        version = shard_->ApplySparse(r.sparse, r.options(), r.header.base_version, fresh);
      } else {
        version = shard_->Read(fresh);
      }
      std::memcpy(reply.data(), &version, sizeof(version));
      if (pull_dropper_ != nullptr) pull_dropper_->Resync(source, fresh);
    }
    {
      std::lock_guard<std::mutex> lock(reply_mu_);
      replies_.push_back(Reply{source, std::move(reply), header});
    }
    reply_ready_.notify_one();
  }
}

void AsyncSgd::ReplyLoop() {
  for (;;) {
    Reply reply;
    {
      std::unique_lock<std::mutex> lock(reply_mu_);
      reply_ready_.wait(lock, [this] { return stop_replies_ || !replies_.empty(); });
      if (replies_.empty()) return;  // stopping and drained
      reply = std::move(replies_.front());
      replies_.pop_front();
    }
    // Two messages (protocol.h): the version (and a sparse reply's count), then the values;
    // a sparse reply of no entries has no second message.
    const std::string& r = reply.bytes;
    const int to = reply.destination;
    comm_->Send(to, kTagReply, r.data(), reply.header);
    if (r.size() > reply.header || reply.header == protocol::kDenseReplyHeaderBytes)
      comm_->Send(to, kTagReply, r.data() + reply.header, r.size() - reply.header);
    bytes_sent_ += static_cast<int64_t>(r.size());
    std::lock_guard<std::mutex> lock(reply_mu_);
    reply_buffers_[to] = std::move(reply.bytes);
    reply_busy_[to] = false;
    reply_free_.notify_all();
  }
}

}  // namespace tern::ps
