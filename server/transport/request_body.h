// The body type the HTTP server parses requests into (a Beast Body). A
// body with a Content-Length goes straight into one string of that size. A
// chunked body, whose size is unknown until its end, is kept in blocks of
// 1 MiB mapped apart from the heap and joined once whole, each block
// unmapped as soon as it is copied: a string grown by doubling would hold
// its old and new buffers at once (1.5x the limit at the last doubling),
// and freed heap memory need not go back to the system. Here a body of N
// bytes costs at most N plus one block of resident memory.
#ifndef ENCODER_SERVER_TRANSPORT_REQUEST_BODY_H_
#define ENCODER_SERVER_TRANSPORT_REQUEST_BODY_H_

#include <boost/beast/core/buffer_traits.hpp>
#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace encoder::http::detail {

// A fixed-capacity buffer in its own anonymous mapping.
class MappedBlock {
 public:
  explicit MappedBlock(size_t capacity);
  ~MappedBlock();
  MappedBlock(MappedBlock&& other) noexcept;
  MappedBlock& operator=(MappedBlock&&) = delete;
  MappedBlock(const MappedBlock&) = delete;

  bool ok() const { return data_ != nullptr; }
  size_t size() const { return size_; }
  size_t room() const { return capacity_ - size_; }
  const char* data() const { return data_; }
  // Appends min(n, room()) bytes; returns how many.
  size_t Append(const char* bytes, size_t n);

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct RequestBody {
  struct value_type {
    std::string whole;                // the body of a known length
    std::vector<MappedBlock> blocks;  // a chunked body, in order
    size_t size = 0;

    // The body as one string; empties this.
    std::string Take();
  };

  static std::uint64_t size(const value_type& v) { return v.size; }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body)
        : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length,
              boost::system::error_code& ec) {
      ec = {};
      if (length) {
        if (*length > body_.whole.max_size()) {
          ec = boost::beast::http::error::buffer_overflow;
          return;
        }
        body_.whole.reserve(static_cast<size_t>(*length));
        known_length_ = true;
      }
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers,
                    boost::system::error_code& ec) {
      ec = {};
      size_t taken = 0;
      for (auto b : boost::beast::buffers_range_ref(buffers)) {
        if (!Put(static_cast<const char*>(b.data()), b.size())) {
          ec = boost::beast::http::error::buffer_overflow;
          return taken;
        }
        taken += b.size();
      }
      return taken;
    }

    void finish(boost::system::error_code& ec) { ec = {}; }

   private:
    bool Put(const char* bytes, size_t n);

    value_type& body_;
    bool known_length_ = false;
  };
};

}  // namespace encoder::http::detail

#endif  // ENCODER_SERVER_TRANSPORT_REQUEST_BODY_H_
