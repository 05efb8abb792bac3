/* png_plot.c — see png_plot.h. */
#define _POSIX_C_SOURCE 200809L
#include "png_plot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Checksums                                                                */
/* ------------------------------------------------------------------------ */

uint32_t png_crc32(uint32_t crc, const unsigned char* data, size_t n) {
    /* bitwise, reflected polynomial 0xEDB88320: a plot is a few hundred KB */
    size_t i;
    int k;
    crc = ~crc;
    for (i = 0; i < n; ++i) {
        crc ^= data[i];
        for (k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t png_adler32(uint32_t adler, const unsigned char* data, size_t n) {
    uint32_t a = adler & 0xFFFFu, b = adler >> 16;
    size_t i;
    for (i = 0; i < n; ++i) {
        a = (a + data[i]) % 65521u;
        b = (b + a) % 65521u;
    }
    return (b << 16) | a;
}

/* ------------------------------------------------------------------------ */
/* PNG writer                                                               */
/* ------------------------------------------------------------------------ */

static void put_be32(unsigned char* p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);  p[3] = (unsigned char)v;
}

/* One chunk: length, type, data, CRC-32 of type and data. */
static int write_chunk(FILE* f, const char* type, const unsigned char* data, size_t n) {
    unsigned char head[8], tail[4];
    uint32_t crc = png_crc32(0, (const unsigned char*)type, 4);
    put_be32(head, (uint32_t)n);
    memcpy(head + 4, type, 4);
    if (n) crc = png_crc32(crc, data, n);
    put_be32(tail, crc);
    return fwrite(head, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4 ? 0
                                                                                                           : -1;
}

int png_write_indexed(const char* path, int w, int h, const unsigned char* pixels,
                      const unsigned char* palette, int n_colors, char* err, size_t err_len) {
    static const unsigned char kSignature[8] = {137, 'P', 'N', 'G', '\r', '\n', 26, '\n'};
    unsigned char ihdr[13];
    size_t row = (size_t)w + 1, raw_len, blocks, z_len, i, pos = 0, done = 0;
    unsigned char *raw, *z;
    FILE* f;
    int y, ok;
    if (w < 1 || h < 1 || w > 16384 || h > 16384 || n_colors < 1 || n_colors > 256) {
        snprintf(err, err_len, "%s: bad image (%dx%d, %d colours)", path, w, h, n_colors);
        return -1;
    }
    /* the scanlines: filter byte 0 (none), then the row's indices */
    raw_len = row * (size_t)h;
    blocks = (raw_len + 65534) / 65535;
    z_len = 2 + raw_len + 5 * blocks + 4;
    raw = (unsigned char*)malloc(raw_len);
    z = (unsigned char*)malloc(z_len);
    if (!raw || !z) {
        free(raw); free(z);
        snprintf(err, err_len, "%s: out of memory for a %dx%d image", path, w, h);
        return -1;
    }
    for (y = 0; y < h; ++y) {
        raw[(size_t)y * row] = 0;
        memcpy(raw + (size_t)y * row + 1, pixels + (size_t)y * (size_t)w, (size_t)w);
    }
    /* zlib: CMF 0x78 (deflate, 32K window), FLG 0x01 (check bits: 0x7801 % 31 == 0) */
    z[pos++] = 0x78;
    z[pos++] = 0x01;
    for (i = 0; i < blocks; ++i) {
        size_t len = raw_len - done < 65535 ? raw_len - done : 65535;
        z[pos++] = i + 1 == blocks ? 1 : 0; /* BFINAL on the last, BTYPE 00 = stored */
        z[pos++] = (unsigned char)(len & 0xFF);
        z[pos++] = (unsigned char)(len >> 8);
        z[pos++] = (unsigned char)(~len & 0xFF);
        z[pos++] = (unsigned char)((~len >> 8) & 0xFF);
        memcpy(z + pos, raw + done, len);
        pos += len;
        done += len;
    }
    put_be32(z + pos, png_adler32(1, raw, raw_len));
    pos += 4;

    put_be32(ihdr, (uint32_t)w);
    put_be32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 3;  /* colour type: indexed */
    ihdr[10] = 0; /* compression: deflate */
    ihdr[11] = 0; /* filter method 0 */
    ihdr[12] = 0; /* no interlace */
    f = fopen(path, "wb");
    if (!f) {
        snprintf(err, err_len, "%s: cannot create: %s", path, strerror(errno));
        free(raw); free(z);
        return -1;
    }
    ok = fwrite(kSignature, 1, 8, f) == 8 && write_chunk(f, "IHDR", ihdr, 13) == 0 &&
         write_chunk(f, "PLTE", palette, (size_t)n_colors * 3) == 0 && write_chunk(f, "IDAT", z, pos) == 0 &&
         write_chunk(f, "IEND", NULL, 0) == 0;
    if (fclose(f) != 0) ok = 0;
    free(raw);
    free(z);
    if (!ok) {
        snprintf(err, err_len, "%s: write failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The monitor's CSV                                                        */
/* ------------------------------------------------------------------------ */

long plot_read_csv(const char* path, double** xs, double** ys, char* err, size_t err_len) {
    FILE* f = fopen(path, "r");
    char line[512];
    long n = 0, cap = 0, lineno = 0, first = 0; /* first: start of the last run's rows */
    double *x = NULL, *y = NULL;
    if (!f) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char *end1, *end2;
        double a, b;
        ++lineno;
        if (line[0] == '\n' || line[0] == '\r' || line[0] == '\0') continue;
        if (!strncmp(line, "step,", 5)) continue; /* a header (one per run that appended) */
        a = strtod(line, &end1);
        if (end1 == line || *end1 != ',') goto bad;
        b = strtod(end1 + 1, &end2);
        if (end2 == end1 + 1 || (*end2 != '\n' && *end2 != '\r' && *end2 != '\0')) goto bad;
        if (n == cap) {
            long c = cap ? 2 * cap : 1024;
            double *nx = (double*)realloc(x, (size_t)c * sizeof *x), *ny;
            if (nx) x = nx;
            ny = nx ? (double*)realloc(y, (size_t)c * sizeof *y) : NULL;
            if (!nx || !ny) {
                snprintf(err, err_len, "%s: out of memory at line %ld", path, lineno);
                goto fail;
            }
            y = ny;
            cap = c;
        }
        if (n > 0 && a < x[n - 1]) first = n;
        x[n] = a;
        y[n] = b;
        ++n;
    }
    if (ferror(f)) {
        snprintf(err, err_len, "%s: read error: %s", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    if (n == 0) {
        snprintf(err, err_len, "%s: no rows", path);
        free(x); free(y);
        return -1;
    }
    if (first > 0) {
        memmove(x, x + first, (size_t)(n - first) * sizeof *x);
        memmove(y, y + first, (size_t)(n - first) * sizeof *y);
        n -= first;
    }
    *xs = x;
    *ys = y;
    return n;
bad:
    snprintf(err, err_len, "%s:%ld: not a \"x,value\" row", path, lineno);
fail:
    fclose(f);
    free(x);
    free(y);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Canvas and font                                                          */
/* ------------------------------------------------------------------------ */

enum { W = 720, H = 440, LEFT = 78, RIGHT = 24, TOP = 44, BOTTOM = 58 };
enum { C_WHITE, C_BLACK, C_GRID, C_RAW, C_SMOOTH, C_TEXT, N_COLORS };
static const unsigned char kPalette[N_COLORS * 3] = {
    255, 255, 255, /* background */
    0,   0,   0,   /* axes */
    225, 225, 225, /* grid */
    150, 185, 235, /* values as logged */
    20,  60,  160, /* moving average */
    60,  60,  60,  /* labels */
};

typedef struct { unsigned char* px; } canvas_t;

static void dot(canvas_t* c, int x, int y, int color) {
    if (x >= 0 && x < W && y >= 0 && y < H) c->px[y * W + x] = (unsigned char)color;
}

static void line(canvas_t* c, int x0, int y0, int x1, int y1, int color) {
    /* Bresenham */
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        int e2 = 2 * e; /* both tests see the error before this step */
        dot(c, x0, y0, color);
        if (x0 == x1 && y0 == y1) break;
        if (e2 >= dy) { e += dy; x0 += sx; }
        if (e2 <= dx) { e += dx; y0 += sy; }
    }
}

/* 5x7 glyphs, rows top to bottom, '1' = ink. Upper case is drawn as lower case. */
static const struct { char ch; const char* rows; } kGlyphs[] = {
    {'0', "01110100011001110101110011000101110"}, {'1', "00100011000010000100001000010001110"},
    {'2', "01110100010000100010001000100011111"}, {'3', "11111000100010000010000011000101110"},
    {'4', "00010001100101010010111110001000010"}, {'5', "11111100001111000001000011000101110"},
    {'6', "00110010001000011110100011000101110"}, {'7', "11111000010001000100010000100001000"},
    {'8', "01110100011000101110100011000101110"}, {'9', "01110100011000101111000010001001100"},
    {'.', "00000000000000000000000000110001100"}, {'-', "00000000000000011111000000000000000"},
    {'+', "00000001000010011111001000010000000"}, {'(', "00010001000100001000010000010000010"},
    {')', "01000001000001000010000100010001000"}, {'_', "00000000000000000000000000000011111"},
    {':', "00000011000110000000011000110000000"}, {',', "00000000000000000000011000010001000"},
    {'/', "00001000010001000100010001000010000"}, {' ', "00000000000000000000000000000000000"},
    {'a', "00000000000111000001011111000101111"}, {'b', "10000100001011011001100011000111110"},
    {'c', "00000000000111010000100001000101110"}, {'d', "00001000010110110011100011000101111"},
    {'e', "00000000000111010001111111000001110"}, {'f', "00110010010100011100010000100001000"},
    {'g', "00000011111000110001011110000101110"}, {'h', "10000100001011011001100011000110001"},
    {'i', "00100000000110000100001000010001110"}, {'j', "00010000000011000010000101001001100"},
    {'k', "10000100001001010100110001010010010"}, {'l', "01100001000010000100001000010001110"},
    {'m', "00000000001101010101101011000110001"}, {'n', "00000000001011011001100011000110001"},
    {'o', "00000000000111010001100011000101110"}, {'p', "00000000001111010001111101000010000"},
    {'q', "00000000000110110011011110000100001"}, {'r', "00000000001011011001100001000010000"},
    {'s', "00000000000111010000011100000111110"}, {'t', "01000010001110001000010000100100110"},
    {'u', "00000000001000110001100011001101101"}, {'v', "00000000001000110001100010101000100"},
    {'w', "00000000001000110001101011010101010"}, {'x', "00000000001000101010001000101010001"},
    {'y', "00000000001000110001011110000101110"}, {'z', "00000000001111100010001000100011111"},
};

static const char* glyph(char ch) {
    size_t i;
    if (ch >= 'A' && ch <= 'Z') ch = (char)(ch - 'A' + 'a');
    for (i = 0; i < sizeof kGlyphs / sizeof kGlyphs[0]; ++i)
        if (kGlyphs[i].ch == ch) return kGlyphs[i].rows;
    return NULL; /* drawn as a box */
}

static int text_width(const char* s, int scale) { return (int)strlen(s) * 6 * scale - scale; }

/* Text with its top-left corner at (x, y); scale 1 or 2. */
static void text(canvas_t* c, int x, int y, const char* s, int scale, int color) {
    for (; *s; ++s, x += 6 * scale) {
        const char* rows = glyph(*s);
        int r, k, i, j;
        for (r = 0; r < 7; ++r)
            for (k = 0; k < 5; ++k) {
                int ink = rows ? rows[r * 5 + k] == '1' : (r == 0 || r == 6 || k == 0 || k == 4);
                if (!ink) continue;
                for (i = 0; i < scale; ++i)
                    for (j = 0; j < scale; ++j) dot(c, x + k * scale + j, y + r * scale + i, color);
            }
    }
}

/* Text drawn upwards (rotated 90 degrees), its first character at the bottom. */
static void text_up(canvas_t* c, int x, int y_bottom, const char* s, int color) {
    for (; *s; ++s, y_bottom -= 6) {
        const char* rows = glyph(*s);
        int r, k;
        for (r = 0; r < 7; ++r)
            for (k = 0; k < 5; ++k)
                if (rows ? rows[r * 5 + k] == '1' : (r == 0 || r == 6 || k == 0 || k == 4))
                    dot(c, x + r, y_bottom - k, color);
    }
}

/* ------------------------------------------------------------------------ */
/* Axes                                                                     */
/* ------------------------------------------------------------------------ */

/* A "nice" tick spacing (1, 2 or 5 x 10^k) giving about `target` ticks over span. */
static double nice_step(double span, int target) {
    double raw = span / target, p = pow(10.0, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1.0 : m < 3.5 ? 2.0 : m < 7.5 ? 5.0 : 10.0) * p;
}

static void format_tick(double v, char* buf, size_t n) {
    if (fabs(v) < 1e-12) v = 0.0;
    snprintf(buf, n, "%g", v);
}

typedef struct {
    int log;          /* y axis logarithmic */
    double lo, hi;    /* axis range (log10 of it when log) */
} axis_t;

static int map_x(const axis_t* a, double v) {
    return LEFT + (int)lround((v - a->lo) / (a->hi - a->lo) * (W - LEFT - RIGHT - 1));
}

static int map_y(const axis_t* a, double v) {
    double t = a->log ? log10(v) : v;
    return H - BOTTOM - 1 - (int)lround((t - a->lo) / (a->hi - a->lo) * (H - TOP - BOTTOM - 1));
}

static void draw_x_axis(canvas_t* c, const axis_t* ax) {
    double step = nice_step(ax->hi - ax->lo, 6), v;
    char buf[32];
    for (v = ceil(ax->lo / step) * step; v <= ax->hi + step * 1e-9; v += step) {
        int px = map_x(ax, v);
        line(c, px, TOP, px, H - BOTTOM - 1, C_GRID);
        line(c, px, H - BOTTOM, px, H - BOTTOM + 4, C_BLACK);
        format_tick(v, buf, sizeof buf);
        text(c, px - text_width(buf, 1) / 2, H - BOTTOM + 8, buf, 1, C_TEXT);
    }
}

static void draw_y_axis(canvas_t* c, const axis_t* ay) {
    char buf[32];
    double v;
    if (ay->log) {
        int k, m;
        for (k = (int)ay->lo; k <= (int)ay->hi; ++k) {
            int py = map_y(ay, pow(10.0, k));
            line(c, LEFT, py, W - RIGHT - 1, py, C_GRID);
            line(c, LEFT - 5, py, LEFT - 1, py, C_BLACK);
            format_tick(pow(10.0, k), buf, sizeof buf);
            text(c, LEFT - 8 - text_width(buf, 1), py - 3, buf, 1, C_TEXT);
            for (m = 2; m <= 9 && k < (int)ay->hi; ++m) { /* minor ticks */
                int pm = map_y(ay, m * pow(10.0, k));
                line(c, LEFT - 3, pm, LEFT - 1, pm, C_BLACK);
            }
        }
        return;
    }
    {
        double step = nice_step(ay->hi - ay->lo, 6);
        for (v = ceil(ay->lo / step) * step; v <= ay->hi + step * 1e-9; v += step) {
            int py = map_y(ay, v);
            line(c, LEFT, py, W - RIGHT - 1, py, C_GRID);
            line(c, LEFT - 5, py, LEFT - 1, py, C_BLACK);
            format_tick(v, buf, sizeof buf);
            text(c, LEFT - 8 - text_width(buf, 1), py - 3, buf, 1, C_TEXT);
        }
    }
}

/* Ranges: x from its first to its last value; y over the finite values,
 * logarithmic (whole decades) when they are all > 0 and span more than 10x. */
static void choose_axes(const double* x, const double* y, size_t n, axis_t* ax, axis_t* ay) {
    double ymin = HUGE_VAL, ymax = -HUGE_VAL;
    size_t i;
    for (i = 0; i < n; ++i)
        if (isfinite(y[i])) {
            if (y[i] < ymin) ymin = y[i];
            if (y[i] > ymax) ymax = y[i];
        }
    if (!(ymin <= ymax)) ymin = 0.0, ymax = 1.0; /* no finite value */
    ax->log = 0;
    ax->lo = x[0];
    ax->hi = x[n - 1] > x[0] ? x[n - 1] : x[0] + 1.0;
    ay->log = ymin > 0.0 && ymax / ymin > 10.0;
    if (ay->log) {
        ay->lo = floor(log10(ymin));
        ay->hi = ceil(log10(ymax));
    } else {
        double pad = ymax > ymin ? 0.05 * (ymax - ymin) : (fabs(ymax) > 0 ? 0.1 * fabs(ymax) : 1.0);
        ay->lo = ymin - pad;
        ay->hi = ymax + pad;
        if (ymin >= 0.0 && ay->lo < 0.0) ay->lo = 0.0;
    }
}

static void draw_series(canvas_t* c, const axis_t* ax, const axis_t* ay, const double* x, const double* y,
                        size_t n, int color) {
    size_t i;
    int have = 0, px = 0, py = 0;
    for (i = 0; i < n; ++i) {
        int qx, qy;
        if (!isfinite(y[i]) || (ay->log && y[i] <= 0.0)) { have = 0; continue; }
        qx = map_x(ax, x[i]);
        qy = map_y(ay, y[i]);
        if (qy < TOP) qy = TOP;
        if (qy > H - BOTTOM - 1) qy = H - BOTTOM - 1;
        if (have) line(c, px, py, qx, qy, color);
        else dot(c, qx, qy, color);
        px = qx, py = qy, have = 1;
    }
}

int plot_loss_png(const char* path, const double* x, const double* y, size_t n, const char* title,
                  const char* x_label, char* err, size_t err_len) {
    canvas_t c;
    axis_t ax, ay;
    double* smooth;
    double alpha, acc = 0.0;
    size_t i;
    int rc, have = 0;
    char y_label[64];
    if (n == 0) {
        snprintf(err, err_len, "%s: nothing to plot", path);
        return -1;
    }
    c.px = (unsigned char*)calloc((size_t)W * H, 1);
    smooth = (double*)malloc(n * sizeof *smooth);
    if (!c.px || !smooth) {
        free(c.px); free(smooth);
        snprintf(err, err_len, "%s: out of memory", path);
        return -1;
    }
    /* moving average over about 1/25 of the run (at least the point itself) */
    alpha = n > 25 ? 25.0 / (double)n : 1.0;
    for (i = 0; i < n; ++i) {
        if (isfinite(y[i])) {
            acc = have ? acc + alpha * (y[i] - acc) : y[i];
            have = 1;
        }
        smooth[i] = have ? acc : y[i];
    }
    choose_axes(x, y, n, &ax, &ay);
    draw_x_axis(&c, &ax);
    draw_y_axis(&c, &ay);
    draw_series(&c, &ax, &ay, x, y, n, C_RAW);
    draw_series(&c, &ax, &ay, x, smooth, n, C_SMOOTH);
    /* frame */
    line(&c, LEFT - 1, TOP, LEFT - 1, H - BOTTOM, C_BLACK);
    line(&c, LEFT - 1, H - BOTTOM, W - RIGHT - 1, H - BOTTOM, C_BLACK);
    line(&c, LEFT - 1, TOP - 1, W - RIGHT - 1, TOP - 1, C_BLACK);
    line(&c, W - RIGHT, TOP - 1, W - RIGHT, H - BOTTOM, C_BLACK);
    /* title, labels, legend */
    text(&c, (W - text_width(title, 2)) / 2, 12, title, 2, C_BLACK);
    text(&c, LEFT + (W - LEFT - RIGHT - text_width(x_label, 1)) / 2, H - BOTTOM + 26, x_label, 1, C_TEXT);
    snprintf(y_label, sizeof y_label, "loss%s", ay.log ? " (log scale)" : "");
    text_up(&c, 10, TOP + (H - TOP - BOTTOM + text_width(y_label, 1)) / 2, y_label, C_TEXT);
    line(&c, W - RIGHT - 150, TOP + 12, W - RIGHT - 130, TOP + 12, C_RAW);
    text(&c, W - RIGHT - 124, TOP + 9, "per step", 1, C_TEXT);
    line(&c, W - RIGHT - 150, TOP + 26, W - RIGHT - 130, TOP + 26, C_SMOOTH);
    line(&c, W - RIGHT - 150, TOP + 27, W - RIGHT - 130, TOP + 27, C_SMOOTH);
    text(&c, W - RIGHT - 124, TOP + 23, "moving average", 1, C_TEXT);
    rc = png_write_indexed(path, W, H, c.px, kPalette, N_COLORS, err, err_len);
    free(c.px);
    free(smooth);
    return rc;
}
