// libFuzzer target: core::DecodeMeta on untrusted metadata blobs. A blob that
// decodes must survive an encode/decode round trip unchanged, and its peer
// text (name, host name, boot id, tcp host) must be plain text.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/metadata.h"
#include "core/plain_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvlane::core;
  auto m = DecodeMeta(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!m.ok()) return 0;
  std::string again = EncodeMeta(m.value());
  if (again != std::string_view(reinterpret_cast<const char*>(data), size)) __builtin_trap();
  const AgentMeta& a = m.value();
  if (a.name.empty() || !IsPlainText(a.name) || !IsPlainText(a.hostname) ||
      !IsPlainText(a.boot_id) || !IsPlainText(a.tcp_host))
    __builtin_trap();  // the decoder let peer text through that errors would quote
  auto m2 = DecodeMeta(again);
  if (!m2.ok() || m2->pieces.size() != m->pieces.size()) __builtin_trap();
  for (size_t i = 0; i < m->pieces.size(); ++i) {
    const Piece& p = m->pieces[i];
    if (p.len == 0 || p.base + p.len < p.base) __builtin_trap();  // decoder let a bad piece through
    if (p.access != kvlane::Access::kReadWrite && p.access != kvlane::Access::kReadOnly)
      __builtin_trap();  // an unknown access value got through
    if (i > 0 && m->pieces[i - 1].base + m->pieces[i - 1].len > p.base) __builtin_trap();
  }
  return 0;
}
