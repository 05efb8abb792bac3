/*
 * test_png_plot.c — the PNG writer and the CSV reader of train_gpt
 * (png_plot.h): the checksums against their published check values, a
 * written image read back here (chunk CRCs, the stored deflate blocks, the
 * Adler-32, the pixels), the CSV rules. check_png.py decodes the files
 * with Python's zlib as the independent reader.
 *   test_png_plot DIR   (writes DIR/small.png, DIR/plot.png and a few CSV files)
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "png_plot.h"
#include "example_check.h"

static uint32_t be32(const unsigned char* p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned char* slurp(const char* path, size_t* n) {
    FILE* f = fopen(path, "rb");
    unsigned char* buf;
    long len;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char*)malloc((size_t)len);
    if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) { free(buf); buf = NULL; }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void test_checksums(void) {
    /* the standard check values of the algorithms */
    CHECK(png_crc32(0, (const unsigned char*)"123456789", 9) == 0xCBF43926u);
    CHECK(png_crc32(0, (const unsigned char*)"", 0) == 0);
    CHECK(png_crc32(png_crc32(0, (const unsigned char*)"1234", 4), (const unsigned char*)"56789", 5) == 0xCBF43926u);
    CHECK(png_adler32(1, (const unsigned char*)"Wikipedia", 9) == 0x11E60398u);
    CHECK(png_adler32(1, (const unsigned char*)"", 0) == 1);
}

/* Write a 300x250 image (rows of 301 bytes: several stored blocks) and parse it back. */
static void test_write_read(const char* dir) {
    enum { WI = 300, HE = 250 };
    static unsigned char px[WI * HE], raw[(WI + 1) * HE];
    unsigned char pal[9] = {255, 255, 255, 0, 0, 0, 200, 10, 10};
    char path[1024], err[256];
    unsigned char* file;
    size_t n = 0, pos = 8, got = 0;
    int i, chunks = 0, ihdr = 0, idat = 0, iend = 0;
    unsigned char* z = NULL;
    size_t zn = 0;
    for (i = 0; i < WI * HE; ++i) px[i] = (unsigned char)((i / 7 + i % 13) % 3);
    snprintf(path, sizeof path, "%s/small.png", dir);
    CHECK(png_write_indexed(path, WI, HE, px, pal, 3, err, sizeof err) == 0);
    CHECK(png_write_indexed(path, 0, HE, px, pal, 3, err, sizeof err) == -1 && strstr(err, "small.png"));
    CHECK(png_write_indexed("/nonexistent-dir/x.png", WI, HE, px, pal, 3, err, sizeof err) == -1 &&
          strstr(err, "/nonexistent-dir/x.png"));
    file = slurp(path, &n);
    CHECK(file != NULL && n > 8);
    if (!file) return;
    CHECK(memcmp(file, "\x89PNG\r\n\x1a\n", 8) == 0);
    while (pos + 12 <= n) {
        uint32_t len = be32(file + pos);
        const unsigned char* type = file + pos + 4;
        CHECK(pos + 12 + len <= n);
        if (pos + 12 + len > n) break;
        CHECK(png_crc32(0, type, 4 + len) == be32(file + pos + 8 + len));
        if (!memcmp(type, "IHDR", 4)) {
            ihdr = 1;
            CHECK(chunks == 0 && len == 13 && be32(type + 4) == WI && be32(type + 8) == HE);
            CHECK(type[12] == 8 && type[13] == 3);
        } else if (!memcmp(type, "PLTE", 4)) {
            CHECK(len == 9 && memcmp(type + 4, pal, 9) == 0);
        } else if (!memcmp(type, "IDAT", 4)) {
            idat = 1;
            z = (unsigned char*)realloc(z, zn + len);
            memcpy(z + zn, type + 4, len);
            zn += len;
        } else if (!memcmp(type, "IEND", 4)) {
            iend = 1;
            CHECK(len == 0 && pos + 12 == n);
        }
        ++chunks;
        pos += 12 + len;
    }
    CHECK(ihdr && idat && iend);
    /* the zlib stream: header, stored blocks, Adler-32 of the scanlines */
    if (z && zn > 6) {
        size_t p = 2;
        int final = 0;
        CHECK(z[0] == 0x78 && ((z[0] << 8) | z[1]) % 31 == 0);
        while (!final && p + 5 <= zn) {
            unsigned len = z[p + 1] | (unsigned)z[p + 2] << 8, nlen = z[p + 3] | (unsigned)z[p + 4] << 8;
            final = z[p] & 1;
            CHECK((z[p] >> 1) == 0); /* stored */
            CHECK((len ^ 0xFFFFu) == nlen);
            CHECK(got + len <= sizeof raw && p + 5 + len <= zn);
            if (got + len > sizeof raw || p + 5 + len > zn) break;
            memcpy(raw + got, z + p + 5, len);
            got += len;
            p += 5 + len;
        }
        CHECK(final && got == sizeof raw && p + 4 == zn);
        CHECK(be32(z + p) == png_adler32(1, raw, got));
        for (i = 0; i < HE; ++i) {
            CHECK(raw[i * (WI + 1)] == 0);
            if (memcmp(raw + i * (WI + 1) + 1, px + i * WI, WI) != 0) { CHECK(!"pixel row differs"); break; }
        }
    }
    free(z);
    free(file);
}

static void write_text(const char* path, const char* text) {
    FILE* f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static void test_csv(const char* dir) {
    char path[1024], err[512];
    double *x = NULL, *y = NULL;
    long n;
    snprintf(path, sizeof path, "%s/one.csv", dir);
    write_text(path, "step,train_loss\n128,2.5\n256,2.25\n384,1.0\n");
    n = plot_read_csv(path, &x, &y, err, sizeof err);
    CHECK(n == 3 && x[0] == 128 && y[1] == 2.25 && x[2] == 384 && y[2] == 1.0);
    free(x); free(y);
    /* two runs appended: the second one (its x starts over) is the one kept */
    snprintf(path, sizeof path, "%s/two.csv", dir);
    write_text(path, "step,train_loss\n128,2.5\n256,2.25\nstep,train_loss\n128,3.5\n256,3.0\n384,2.0\n");
    n = plot_read_csv(path, &x, &y, err, sizeof err);
    CHECK(n == 3 && x[0] == 128 && y[0] == 3.5 && y[2] == 2.0);
    free(x); free(y);
    /* a resumed run continues the x values: all rows kept */
    snprintf(path, sizeof path, "%s/resumed.csv", dir);
    write_text(path, "step,train_loss\n128,2.5\n256,2.25\nstep,train_loss\n384,2.0\n");
    n = plot_read_csv(path, &x, &y, err, sizeof err);
    CHECK(n == 3);
    free(x); free(y);
    snprintf(path, sizeof path, "%s/bad.csv", dir);
    write_text(path, "step,train_loss\n128,2.5\n256;2.25\n");
    CHECK(plot_read_csv(path, &x, &y, err, sizeof err) == -1 && strstr(err, "bad.csv:3"));
    snprintf(path, sizeof path, "%s/empty.csv", dir);
    write_text(path, "step,train_loss\n");
    CHECK(plot_read_csv(path, &x, &y, err, sizeof err) == -1 && strstr(err, "no rows"));
    CHECK(plot_read_csv("/nonexistent.csv", &x, &y, err, sizeof err) == -1 && strstr(err, "/nonexistent.csv"));
}

static void test_plot(const char* dir) {
    enum { N = 500 };
    double x[N], y[N];
    char path[1024], err[256];
    int i;
    for (i = 0; i < N; ++i) {
        x[i] = 128.0 * (i + 1);
        y[i] = 2.5 * exp(-i / 60.0) + 0.003 * (1 + (i % 7));
    }
    snprintf(path, sizeof path, "%s/plot.png", dir);
    CHECK(plot_loss_png(path, x, y, N, "train loss", "samples", err, sizeof err) == 0);
    snprintf(path, sizeof path, "%s/flat.png", dir); /* one point, linear axis */
    CHECK(plot_loss_png(path, x, y, 1, "train loss", "samples", err, sizeof err) == 0);
    CHECK(plot_loss_png(path, x, y, 0, "train loss", "samples", err, sizeof err) == -1);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    test_checksums();
    test_write_read(argv[1]);
    test_csv(argv[1]);
    test_plot(argv[1]);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("png_plot: all checks passed\n");
    return 0;
}
