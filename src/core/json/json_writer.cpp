#include "core/json/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ds::json {

std::string format_number(double v) {
    if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : (v > 0 ? "Infinity" : "-Infinity");
    if (v == std::floor(v) && std::fabs(v) < 1e15) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", v);
        return buf;
    }
    char buf[40];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

void append_quoted(std::string& out, std::string_view s) {
    out += '"';
    for (char ch : s) {
        unsigned char c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

void JsonWriter::prefix(std::string_view key) {
    if (stack_.empty()) return;
    Level& top = stack_.back();
    if (!top.is_object) {  // arrays hold scalars only here: one line
        if (!top.empty) out_ += ", ";
        top.empty = false;
        return;
    }
    if (!top.empty) out_ += ',';
    top.empty = false;
    out_ += '\n';
    out_.append(2 * stack_.size(), ' ');
    append_quoted(out_, key);
    out_ += ": ";
}

void JsonWriter::open(std::string_view key, bool is_object) {
    prefix(key);
    out_ += is_object ? '{' : '[';
    stack_.push_back({is_object, true});
}

// Objects end on their own line (when not empty); arrays, one line long, in place.
void JsonWriter::close() {
    const Level top = stack_.back();
    stack_.pop_back();
    if (top.is_object && !top.empty) {
        out_ += '\n';
        out_.append(2 * stack_.size(), ' ');
    }
    out_ += top.is_object ? '}' : ']';
}

void JsonWriter::begin_object(std::string_view key) { open(key, true); }
void JsonWriter::end_object() { close(); }
void JsonWriter::begin_array(std::string_view key) { open(key, false); }
void JsonWriter::end_array() { close(); }

void JsonWriter::value(std::string_view key, bool v) {
    prefix(key);
    out_ += v ? "true" : "false";
}

void JsonWriter::value(std::string_view key, int64_t v) {
    prefix(key);
    out_ += std::to_string(v);
}

void JsonWriter::value(std::string_view key, double v) {
    prefix(key);
    out_ += format_number(v);
}

void JsonWriter::value(std::string_view key, std::string_view v) {
    prefix(key);
    append_quoted(out_, v);
}

void JsonWriter::null(std::string_view key) {
    prefix(key);
    out_ += "null";
}

void JsonWriter::raw(std::string_view key, std::string_view json) {
    prefix(key);
    out_ += json;
}

}  // namespace ds::json
