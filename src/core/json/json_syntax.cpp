// A strict RFC 8259 syntax check run before cJSON parses the text, so a
// syntax error is reported at the exact line and column with a precise
// reason (cJSON only says where its sub-parser stopped).
#include <cctype>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json/json_text.h"

namespace ds::json {

namespace {

// DeepSpeed configs (and this library's manifests) nest 4 levels at most; a
// low cap keeps hostile input from costing time or stack (cJSON allows 1000).
constexpr int kMaxDepth = 64;

class SyntaxChecker {
public:
    SyntaxChecker(std::string_view t, const TextErrors& errors) : t_(t), errors_(errors) {}

    void run() {
        if (t_.compare(0, 3, "\xEF\xBB\xBF") == 0) i_ = 3;  // UTF-8 byte-order mark
        ws();
        if (i_ >= t_.size()) fail_at(i_, t_.empty() ? "empty input" : "no JSON value (only whitespace)");
        value(0);
        ws();
        if (i_ < t_.size()) fail_at(i_, "unexpected " + what(i_) + " after the JSON value");
    }

private:
    [[noreturn]] void fail_at(size_t pos, const std::string& why) const {
        size_t line = 1, col = 1;
        for (size_t k = 0; k < pos && k < t_.size(); ++k) {
            const unsigned char c = static_cast<unsigned char>(t_[k]);
            if (c == '\n') {
                ++line;
                col = 1;
            } else if ((c & 0xC0) != 0x80) {  // count characters, not UTF-8 continuation bytes
                ++col;
            }
        }
        fail(errors_.status, "%s%s syntax error at line %zu, column %zu: %s", errors_.prefix.c_str(),
             errors_.subject, line, col, why.c_str());
    }

    std::string what(size_t pos) const {
        if (pos >= t_.size()) return "end of input";
        const unsigned char c = static_cast<unsigned char>(t_[pos]);
        if (c == 0) return "NUL byte";
        if (std::isprint(c)) return format("character '%c'", c);
        return format("byte 0x%02x", c);
    }

    [[noreturn]] void unexpected(const char* expected) const {
        fail_at(i_, "unexpected " + what(i_) + (expected[0] ? std::string(", expected ") + expected : ""));
    }

    void ws() {
        while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
    }

    // Consumes `c` when it comes next.
    bool eat(char c) {
        if (!peek(c)) return false;
        ++i_;
        return true;
    }

    bool peek(char c) const { return i_ < t_.size() && t_[i_] == c; }

    void value(int depth) {
        if (i_ >= t_.size()) unexpected("a value");
        const char c = t_[i_];
        if (c == '{' || c == '[') {
            if (depth >= kMaxDepth) fail_at(i_, "nesting deeper than 64 levels");
            c == '{' ? object(depth + 1) : array(depth + 1);
        } else if (c == '"') {
            string();
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            number();
        } else if (t_.compare(i_, 4, "true") == 0 || t_.compare(i_, 4, "null") == 0) {
            i_ += 4;
        } else if (t_.compare(i_, 5, "false") == 0) {
            i_ += 5;
        } else {
            unexpected("a value");
        }
    }

    void object(int depth) {
        ++i_;  // '{'
        ws();
        if (eat('}')) return;
        for (;;) {
            ws();
            if (peek('}')) fail_at(i_, "trailing comma before '}'");
            if (!peek('"')) unexpected("a '\"' starting a key");
            string();
            ws();
            if (!eat(':')) unexpected("':' after the key");
            ws();
            value(depth);
            ws();
            if (eat(',')) continue;
            if (eat('}')) return;
            unexpected("',' or '}'");
        }
    }

    void array(int depth) {
        ++i_;  // '['
        ws();
        if (eat(']')) return;
        for (;;) {
            ws();
            if (peek(']')) fail_at(i_, "trailing comma before ']'");
            value(depth);
            ws();
            if (eat(',')) continue;
            if (eat(']')) return;
            unexpected("',' or ']'");
        }
    }

    unsigned hex4(size_t at) const {  // the four hex digits at `at` (already checked)
        unsigned v = 0;
        for (size_t k = 0; k < 4; ++k) {
            const char h = t_[at + k];
            v = v * 16 + static_cast<unsigned>(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return v;
    }

    bool hex4_at(size_t at) const {
        for (size_t k = 0; k < 4; ++k)
            if (at + k >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[at + k]))) return false;
        return true;
    }

    // One \uXXXX escape (i_ on the 'u'). cJSON keeps strings as C strings, so
    // an escaped NUL would silently cut a key or value short: refused. A
    // surrogate must come as a high/low pair (RFC 8259 §7 allows lone ones
    // syntactically, but they are not text; cJSON fails on them).
    void unicode_escape() {
        const size_t at = i_ - 1;  // the backslash
        if (!hex4_at(i_ + 1)) fail_at(at, "invalid \\u escape (four hex digits expected)");
        const unsigned cp = hex4(i_ + 1);
        i_ += 4;
        if (cp == 0) fail_at(at, "escaped NUL (\\u0000) inside a string is not accepted");
        if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(at, format("lone low surrogate \\u%04x", cp));
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            const bool pair = i_ + 2 < t_.size() && t_[i_ + 1] == '\\' && t_[i_ + 2] == 'u' && hex4_at(i_ + 3) &&
                              hex4(i_ + 3) >= 0xDC00 && hex4(i_ + 3) <= 0xDFFF;
            if (!pair) fail_at(at, format("lone high surrogate \\u%04x (a low surrogate \\udc00-\\udfff must follow)", cp));
            i_ += 6;
        }
    }

    // One UTF-8 encoded character starting at i_ (a byte >= 0x80); leaves i_
    // on its last byte. Overlong forms, surrogates and code points past
    // U+10FFFF are invalid (RFC 3629).
    void utf8_char() {
        const unsigned char b0 = static_cast<unsigned char>(t_[i_]);
        size_t n = 0;
        unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (b0 >= 0xC2 && b0 <= 0xDF) n = 1;
        else if (b0 == 0xE0) n = 2, lo = 0xA0;
        else if (b0 >= 0xE1 && b0 <= 0xEC) n = 2;
        else if (b0 == 0xED) n = 2, hi = 0x9F;
        else if (b0 >= 0xEE && b0 <= 0xEF) n = 2;
        else if (b0 == 0xF0) n = 3, lo = 0x90;
        else if (b0 >= 0xF1 && b0 <= 0xF3) n = 3;
        else if (b0 == 0xF4) n = 3, hi = 0x8F;
        for (size_t k = 1; n && k <= n; ++k) {
            const unsigned c = i_ + k < t_.size() ? static_cast<unsigned char>(t_[i_ + k]) : 0;
            if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) n = 0;
        }
        if (n == 0) fail_at(i_, format("invalid UTF-8 (byte 0x%02x at byte offset %zu)", b0, i_));
        i_ += n;
    }

    void string() {
        const size_t start = i_++;
        while (i_ < t_.size()) {
            const unsigned char c = static_cast<unsigned char>(t_[i_]);
            if (c == '"') {
                ++i_;
                return;
            }
            if (c < 0x20) fail_at(i_, "control character (byte " + format("0x%02x", c) + ") inside a string");
            if (c >= 0x80) utf8_char();
            if (c == '\\') {
                ++i_;
                if (i_ >= t_.size()) break;
                const char e = t_[i_];
                if (e == 'u') {
                    unicode_escape();
                } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
                    fail_at(i_ - 1, "invalid escape '\\" + std::string(1, e) + "'");
                }
            }
            ++i_;
        }
        fail_at(start, "unterminated string");
    }

    void digits() {
        if (i_ >= t_.size() || !std::isdigit(static_cast<unsigned char>(t_[i_]))) unexpected("a digit");
        while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_;
    }

    void number() {
        if (peek('-')) ++i_;
        if (peek('0')) {
            ++i_;
            if (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_])))
                fail_at(i_, "leading zeros are not allowed in a number");
        } else {
            digits();
        }
        if (peek('.')) {
            ++i_;
            digits();
        }
        if (peek('e') || peek('E')) {
            ++i_;
            if (peek('+') || peek('-')) ++i_;
            digits();
        }
    }

    std::string_view t_;
    const TextErrors& errors_;
    size_t i_ = 0;
};

}  // namespace

void check_syntax(std::string_view text, const TextErrors& errors) { SyntaxChecker(text, errors).run(); }

}  // namespace ds::json
