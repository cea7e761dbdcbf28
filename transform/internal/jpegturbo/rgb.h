// pipe's YCbCr to planar RGB conversion (rgb.c), which takes the place of
// libjpeg-turbo's colour converter for the rows a window decode keeps.

// pj_cconvert has the layout of libjpeg's struct jpeg_color_deconverter
// (jpegint.h, which libjpeg does not install).
typedef struct {
	void (*start_pass)(j_decompress_ptr);
	void (*color_convert)(j_decompress_ptr, JSAMPIMAGE, JDIMENSION, JSAMPARRAY, int);
} pj_cconvert;

typedef struct {
	pj_cconvert pub;
	unsigned char *r, *g, *b; // the planes
	int skip;                 // columns of each converted row left of the window
	int cw, ch;               // the window
	int y;                    // the next row to write
} pj_rgb;

// pj_rgb_install makes libjpeg's colour conversion of d write the window
// (cw×ch, from column skip of each output row) of the rows that
// jpeg_read_scanlines returns from now on into the planes R, G and B of
// out, as libjpeg-turbo's AVX2 converter computes them. It returns 0 and
// changes nothing where d does not convert YCbCr to RGB or the CPU has no
// AVX2.
int pj_rgb_install(j_decompress_ptr d, pj_rgb *c, unsigned char *out, int skip, int cw, int ch);

// pj_ycc_rgb converts n pixels of Y, Cb and Cr into R, G and B planes.
void pj_ycc_rgb(const unsigned char *y, const unsigned char *cb, const unsigned char *cr,
                unsigned char *r, unsigned char *g, unsigned char *b, int n);
