// Text that a peer hands over and kvlane passes on: agent names (in metadata
// and in every connection's Hello) end up in notifications, errors and logs,
// and in bindings that decode them as UTF-8 (Python's str). Such text must be
// plain: valid UTF-8 without control or bidi characters, so that a peer's bytes can
// neither garble a terminal or log line nor make a binding fail to decode
// (which in Python lost the notifications of a whole take).
#pragma once

#include <string>
#include <string_view>

#include "kvlane/status.h"

namespace kvlane::core {

// True when `s` is well-formed UTF-8 (shortest forms only, no surrogates,
// nothing past U+10FFFF) holding no control character (U+0000..U+001F,
// U+007F..U+009F), line or paragraph separator (U+2028, U+2029) nor
// bidirectional control (the marks U+200E, U+200F, U+061C, and U+202A..U+202E,
// U+2066..U+2069). The empty string is plain.
bool IsPlainText(std::string_view s);

// An agent name: 1..255 bytes of plain text. `what` names where it came from
// in the error ("AgentOptions.name", "metadata", "hello").
Status CheckAgentName(std::string_view name, std::string_view what);

// `s` with every byte that is not part of plain text replaced by '?': for a
// peer's free text (an error's reason) quoted in a local message.
std::string PlainTextOf(std::string_view s);

}  // namespace kvlane::core
