// EmbedStream: many Embed requests on one bidirectional stream.
//
// Each request read is validated and queued like a unary call, so requests
// of one stream batch with each other and with everyone else's. Responses
// are written strictly in request order, one write at a time. At most
// kMaxOutstanding requests per stream are in the server at once; reading
// pauses beyond that (flow control instead of unbounded buffering). A bad
// request, including one that does not parse, gets a StreamError response in
// its place and the stream goes on: every request read is answered.
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/service/encoder_service.h"
#include "server/service/request_parser.h"
#include "server/service/status_util.h"
#include "server/tracing/tracer.h"

namespace encoder::service {
namespace {

using logging::IsUsableRequestId;

constexpr size_t kMaxOutstanding = 32;

class EmbedStreamReactor
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  EmbedStreamReactor(EncoderServiceImpl* service,
                     grpc::CallbackServerContext* context)
      : service_(service),
        context_(context),
        access_(EncoderServiceImpl::BeginAccess("EmbedStream", context)) {
    // The stream's id (x-request-id, else generated) goes back at once; each
    // request is logged under its own request_id, else "<stream id>-<n>".
    EncoderServiceImpl::EchoCallMetadata(context, &access_);
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      mu_.Lock();
      reading_done_ = true;
      Act(Next());
      return;
    }
    auto item = std::make_shared<Item>();
    std::string request_id;
    const absl::Status parsed =
        ParseRequest(read_buffer_, &item->request, &request_id);
    read_buffer_.Clear();
    if (parsed.ok()) request_id = item->request.request_id();
    item->access = access_;
    tracing::BeginStreamRequest(&item->access);
    ++read_count_;
    item->access.request_id =
        IsUsableRequestId(request_id)
            ? request_id
            : absl::StrCat(access_.request_id, "-", read_count_);
    bool read_more;
    {
      absl::MutexLock lock(&mu_);
      // After a cancel or failed write nothing more is computed; the
      // reactor may already be finishing.
      if (broken_ || finished_) return;
      items_.push_back(item);
      ++pending_;
      read_more = items_.size() < kMaxOutstanding;
      read_paused_ = !read_more;
    }
    if (!parsed.ok()) {
      // Answered in its place, like any other rejected request.
      item->request.set_request_id(request_id);
      const grpc::Status status = ToGrpcStatus(parsed);
      service_->RecordRejected("EmbedStream", status);
      OnItemDone(item, status);
      if (read_more) StartRead(&read_buffer_);
      return;
    }
    service_->SubmitEmbed(
        "EmbedStream", context_, &item->request, &item->response,
        [this, item](const grpc::Status& status) { OnItemDone(item, status); },
        &item->access);
    if (read_more) StartRead(&read_buffer_);
  }

  void OnWriteDone(bool ok) override {
    mu_.Lock();
    writing_ = false;
    items_.pop_front();
    if (!ok) broken_ = true;
    Act(Next());
  }

  void OnCancel() override {
    mu_.Lock();
    broken_ = true;
    Act(Next());
  }

  // In-flight metrics count each request on the stream (SubmitEmbed), not
  // the stream itself.
  void OnDone() override { delete this; }

 private:
  struct Item {
    v1::EmbedRequest request;
    v1::EmbedResponse response;
    v1::EmbedStreamResponse out;
    grpc::ByteBuffer out_bytes;    // `out` serialized, written to the stream
    UnreadResponses::Hold unread;  // out_bytes, until written or dropped
    bool ready = false;            // guarded by the reactor's mu_
    AccessRecord access;
    const absl::Time start = absl::Now();
  };

  enum class Action { kNone, kWrite, kRead, kWriteAndRead, kFinish };

  void OnItemDone(const std::shared_ptr<Item>& item,
                  const grpc::Status& status) {
    EncoderServiceImpl::LogCall(&item->access, status, item->start);
    item->out.set_request_id(item->request.request_id());
    if (status.ok()) {
      *item->out.mutable_response() = std::move(item->response);
    } else {
      v1::StreamError* error = item->out.mutable_error();
      error->set_code(status.error_code());
      error->set_message(status.error_message());
    }
    // Serialized here, on the caller's thread (the batcher's worker), not
    // under the lock.
    if (absl::Status s = SerializeResponse(item->out, &item->out_bytes);
        !s.ok()) {
      item->out.Clear();
      item->out.set_request_id(item->request.request_id());
      item->out.mutable_error()->set_code(grpc::StatusCode::INTERNAL);
      item->out.mutable_error()->set_message(std::string(s.message()));
      (void)SerializeResponse(item->out, &item->out_bytes);
    }
    item->unread = service_->HoldUnread(
        context_, static_cast<int64_t>(item->out_bytes.Length()));
    mu_.Lock();
    item->ready = true;
    --pending_;
    Act(Next());
  }

  // Decides the next step under the lock; the step itself is taken after
  // unlocking (Act), since gRPC may run reactions inline.
  Action Next() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return Action::kNone;
    if (broken_) {
      if (pending_ == 0 && !writing_) {
        finished_ = true;
        return Action::kFinish;
      }
      return Action::kNone;
    }
    bool write = false, read = false;
    if (!writing_ && !items_.empty() && items_.front()->ready) {
      writing_ = true;
      write = true;
    }
    if (read_paused_ && !reading_done_ && items_.size() < kMaxOutstanding) {
      read_paused_ = false;
      read = true;
    }
    if (write && read) return Action::kWriteAndRead;
    if (write) return Action::kWrite;
    if (read) return Action::kRead;
    if (reading_done_ && items_.empty() && pending_ == 0 && !writing_) {
      finished_ = true;
      return Action::kFinish;
    }
    return Action::kNone;
  }

  // Called with mu_ held; releases it before acting.
  void Act(Action action) ABSL_UNLOCK_FUNCTION(mu_) {
    const grpc::ByteBuffer* to_write =
        (action == Action::kWrite || action == Action::kWriteAndRead)
            ? &items_.front()->out_bytes
            : nullptr;
    const bool cancelled = broken_;
    mu_.Unlock();
    if (to_write != nullptr) StartWrite(to_write);
    if (action == Action::kRead || action == Action::kWriteAndRead) {
      StartRead(&read_buffer_);
    }
    if (action == Action::kFinish) {
      Finish(cancelled ? ToGrpcStatus(absl::CancelledError("stream cancelled"))
                       : grpc::Status::OK);
    }
  }

  EncoderServiceImpl* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer read_buffer_;  // owned by the outstanding read
  AccessRecord access_;           // the stream's; each request copies it
  int64_t read_count_ = 0;        // requests read (reads are sequential)

  absl::Mutex mu_;
  // Request order; the front is written next.
  std::deque<std::shared_ptr<Item>> items_ ABSL_GUARDED_BY(mu_);
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;  // submitted, result not yet back
  // A write is outstanding (items_.front()).
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  // Too many outstanding; resume on a write.
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  bool reading_done_ ABSL_GUARDED_BY(mu_) = false;
  // Cancelled or a write failed: drain, then finish.
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

// A stream refused on entry: finishes at once without reading.
class RefusedStreamReactor
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit RefusedStreamReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
EncoderServiceImpl::EmbedStream(grpc::CallbackServerContext* context) {
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    RecordRejected("EmbedStream", auth);
    AccessRecord access = BeginAccess("EmbedStream", context);
    EchoCallMetadata(context, &access, /*trailing=*/true);
    LogCall(&access, auth, absl::Now());
    return new RefusedStreamReactor(auth);
  }
  return new EmbedStreamReactor(this, context);
}

}  // namespace encoder::service
