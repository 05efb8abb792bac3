// A strict RFC 8259 syntax check run before cJSON parses the text, so a
// syntax error is reported at the exact line and column with a precise
// reason (cJSON only says where its sub-parser stopped).
#include <cctype>
#include <string>
#include <string_view>

#include "config/json_reader.h"
#include "core/error.h"

namespace ds::config::detail {

namespace {

constexpr int kMaxDepth = 1000;  // cJSON's nesting limit

class SyntaxChecker {
public:
    explicit SyntaxChecker(std::string_view t) : t_(t) {}

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
        fail(DS_ERR_INVALID_CONFIG, "config JSON syntax error at line %zu, column %zu: %s", line, col,
             why.c_str());
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

    bool peek(char c) const { return i_ < t_.size() && t_[i_] == c; }

    void value(int depth) {
        if (i_ >= t_.size()) unexpected("a value");
        const char c = t_[i_];
        if (c == '{' || c == '[') {
            if (depth >= kMaxDepth) fail_at(i_, "nesting deeper than 1000 levels");
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
        if (peek('}')) {
            ++i_;
            return;
        }
        for (;;) {
            ws();
            if (peek('}')) fail_at(i_, "trailing comma before '}'");
            if (!peek('"')) unexpected("a '\"' starting a key");
            string();
            ws();
            if (!peek(':')) unexpected("':' after the key");
            ++i_;
            ws();
            value(depth);
            ws();
            if (peek(',')) {
                ++i_;
                continue;
            }
            if (peek('}')) {
                ++i_;
                return;
            }
            unexpected("',' or '}'");
        }
    }

    void array(int depth) {
        ++i_;  // '['
        ws();
        if (peek(']')) {
            ++i_;
            return;
        }
        for (;;) {
            ws();
            if (peek(']')) fail_at(i_, "trailing comma before ']'");
            value(depth);
            ws();
            if (peek(',')) {
                ++i_;
                continue;
            }
            if (peek(']')) {
                ++i_;
                return;
            }
            unexpected("',' or ']'");
        }
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
            if (c == '\\') {
                ++i_;
                if (i_ >= t_.size()) break;
                const char e = t_[i_];
                if (e == 'u') {
                    for (int k = 1; k <= 4; ++k)
                        if (i_ + k >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_ + k])))
                            fail_at(i_ - 1, "invalid \\u escape (four hex digits expected)");
                    i_ += 4;
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
    size_t i_ = 0;
};

}  // namespace

void check_json_syntax(std::string_view text) { SyntaxChecker(text).run(); }

}  // namespace ds::config::detail
