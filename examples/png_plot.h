/*
 * png_plot.h — a loss curve as a PNG, with no library: the CSV monitor's
 * file read back, a line plot with axes, ticks and labels drawn into an
 * indexed-colour canvas (a built-in 5x7 font), and a PNG writer of our own
 * (zlib stream of stored deflate blocks, Adler-32, CRC-32 per chunk).
 * Plain C99; used by examples/train_gpt.c, tested by test_png_plot.c and
 * check_png.py.
 */
#ifndef PNG_PLOT_H
#define PNG_PLOT_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32 (ISO 3309, as PNG uses it): start with crc = 0. */
uint32_t png_crc32(uint32_t crc, const unsigned char* data, size_t n);
/* Adler-32 (RFC 1950): start with adler = 1. */
uint32_t png_adler32(uint32_t adler, const unsigned char* data, size_t n);

/* Write an 8-bit indexed-colour PNG: `pixels` is w*h palette indices, row
 * by row; `palette` holds n_colors RGB triples (1..256). Returns 0, or -1
 * with a message naming the path in err. */
int png_write_indexed(const char* path, int w, int h, const unsigned char* pixels,
                      const unsigned char* palette, int n_colors, char* err, size_t err_len);

/* Read a DeepSpeed CSV monitor file (a header line "step,<name>", then
 * "x,value" rows). A file several runs appended to keeps only the last run:
 * the rows after the last place where x goes back. Returns the number of
 * rows (>= 1) with malloc'ed *x and *y, or -1 with a message in err (the
 * path, and the line for a malformed row). */
long plot_read_csv(const char* path, double** x, double** y, char* err, size_t err_len);

/* Plot y against x (n >= 1 points) into a 720x440 PNG: the values as given
 * and an exponential moving average, a log y axis when the values span
 * more than a factor of 10 (all > 0), ticks and labels on both axes.
 * Returns 0, or -1 with a message in err. */
int plot_loss_png(const char* path, const double* x, const double* y, size_t n, const char* title,
                  const char* x_label, char* err, size_t err_len);

#endif /* PNG_PLOT_H */
