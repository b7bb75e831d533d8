// SPDX-License-Identifier: MIT
// video: decoding with libavformat/libavcodec from memory, frame selection, RGB conversion with
// libswscale, and the resize to the per-frame grid (the reference choices are in video.h).
//
// Two passes over the buffer: the first only demuxes, counting the stream's frames (packets) to
// size the sampling, as torchcodec's exact scan does; the second decodes from the start and
// converts the sampled frames as they come out, stopping after the last one. No seeking: simple
// and exact, at the cost of decoding everything up to the last sampled frame (bounded by
// max_decode_pixels); seeking to keyframes is the step to take if long clips become common.
#include "video/video.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

// Demuxers allowed (av_match_list against each demuxer's name list): the common upload
// containers. Excluded on purpose: playlists and concat (hls, dash, concat) that open other
// files, image2 (file patterns), and the raw/elementary ones that accept almost any bytes.
#define DEMUXERS "mov,matroska,avi,mpegts,flv,ogg,gif"
#define IO_BUF   (64 * 1024)

struct gl_video_limits gl_video_default_limits(void)
{
    return (struct gl_video_limits){.max_bytes = (size_t)256 << 20,
                                    .max_side = 4096,
                                    .max_pixels = 4096u * 2304u,
                                    .max_frames = 108000,
                                    .max_duration_s = 3600.0,
                                    .max_decode_pixels = (uint64_t)1 << 35};
}

static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void quiet_ffmpeg(void)
{
    const char *lvl = getenv("GLINT_LOG");
    if (!lvl || strcmp(lvl, "debug"))
        av_log_set_level(AV_LOG_FATAL);
}

static const char *av_msg(int code, char buf[AV_ERROR_MAX_STRING_SIZE])
{
    av_strerror(code, buf, AV_ERROR_MAX_STRING_SIZE);
    return buf;
}

// ---- in-memory input ---------------------------------------------------------------------------

struct mem_io {
    const uint8_t *data;
    size_t size, pos;
};

static int io_read(void *opaque, uint8_t *buf, int n)
{
    struct mem_io *m = opaque;
    size_t left = m->size - m->pos, k = (size_t)n < left ? (size_t)n : left;
    if (k == 0)
        return AVERROR_EOF;
    memcpy(buf, m->data + m->pos, k);
    m->pos += k;
    return (int)k;
}

static int64_t io_seek(void *opaque, int64_t off, int whence)
{
    struct mem_io *m = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE:
        return (int64_t)m->size;
    case SEEK_SET:
        base = 0;
        break;
    case SEEK_CUR:
        base = (int64_t)m->pos;
        break;
    case SEEK_END:
        base = (int64_t)m->size;
        break;
    default:
        return AVERROR(EINVAL);
    }
    if (off < -base || off > (int64_t)m->size - base)
        return AVERROR(EINVAL);
    m->pos = (size_t)(base + off);
    return (int64_t)m->pos;
}

struct demux {
    struct mem_io io;
    AVIOContext *avio;
    AVFormatContext *fmt;
    AVStream *st;
};

static void demux_close(struct demux *d)
{
    avformat_close_input(&d->fmt);
    if (d->avio)
        av_freep(&d->avio->buffer);
    avio_context_free(&d->avio);
    *d = (struct demux){0};
}

static gl_status demux_open(struct demux *d, const uint8_t *data, size_t n, struct gl_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    *d = (struct demux){.io = {.data = data, .size = n}};
    uint8_t *buf = av_malloc(IO_BUF);
    if (buf)
        d->avio = avio_alloc_context(buf, IO_BUF, 0, &d->io, io_read, NULL, io_seek);
    if (!d->avio) {
        av_free(buf);
        return gl_err_set(err, GL_E_NOMEM, "video: open: out of memory");
    }
    AVFormatContext *fmt = avformat_alloc_context();
    if (!fmt) {
        demux_close(d);
        return gl_err_set(err, GL_E_NOMEM, "video: open: out of memory");
    }
    fmt->pb = d->avio;
    fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    AVDictionary *opt = NULL;
    // No protocol is named "none": a demuxer that tries to open another resource fails.
    int ret = av_dict_set(&opt, "format_whitelist", DEMUXERS, 0);
    if (ret >= 0)
        ret = av_dict_set(&opt, "protocol_whitelist", "none", 0);
    if (ret >= 0)
        ret = avformat_open_input(&fmt, NULL, NULL, &opt); // frees fmt on failure
    else
        avformat_free_context(fmt);
    av_dict_free(&opt);
    if (ret < 0) {
        demux_close(d);
        return gl_err_set(err, ret == AVERROR(ENOMEM) ? GL_E_NOMEM : GL_E_FORMAT,
                          "video: open: truncated, or not one of the containers %s (%s)", DEMUXERS,
                          av_msg(ret, eb));
    }
    d->fmt = fmt;
    ret = avformat_find_stream_info(fmt, NULL);
    if (ret < 0) {
        demux_close(d);
        return gl_err_set(err, GL_E_FORMAT, "video: open: cannot read the stream parameters: %s",
                          av_msg(ret, eb));
    }
    ret = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
    if (ret < 0 || (fmt->streams[ret]->disposition & AV_DISPOSITION_ATTACHED_PIC)) {
        demux_close(d);
        return gl_err_set(err, GL_E_FORMAT, "video: open: no video stream");
    }
    d->st = fmt->streams[ret];
    return GL_OK;
}

// Reads the next packet of the video stream into pkt: *got is 1 on a packet, 0 at the end.
static gl_status next_packet(struct demux *d, AVPacket *pkt, int64_t n_read, int *got,
                             struct gl_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    for (;;) {
        int ret = av_read_frame(d->fmt, pkt);
        if (ret == AVERROR_EOF) {
            *got = 0;
            return GL_OK;
        }
        if (ret < 0)
            return gl_err_set(err, ret == AVERROR(ENOMEM) ? GL_E_NOMEM : GL_E_FORMAT,
                              "video: demux: corrupt or truncated after %lld frames: %s",
                              (long long)n_read, av_msg(ret, eb));
        if (pkt->stream_index == d->st->index && !(pkt->flags & AV_PKT_FLAG_DISCARD)) {
            if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
                av_packet_unref(pkt);
                return gl_err_set(err, GL_E_FORMAT, "video: demux: frame %lld is truncated",
                                  (long long)n_read);
            }
            *got = 1;
            return GL_OK;
        }
        av_packet_unref(pkt);
    }
}

static gl_status count_frames(struct demux *d, const struct gl_video_limits *lim, int64_t *total,
                              struct gl_err *err)
{
    AVPacket *pkt = av_packet_alloc();
    if (!pkt)
        return gl_err_set(err, GL_E_NOMEM, "video: demux: out of memory");
    gl_status st = GL_OK;
    int got = 1;
    *total = 0;
    while (st == GL_OK && got) {
        st = next_packet(d, pkt, *total, &got, err);
        if (st == GL_OK && got) {
            av_packet_unref(pkt);
            if (++*total > lim->max_frames)
                st = gl_err_set(err, GL_E_LIMIT, "video: limit: more than %lld frames",
                                (long long)lim->max_frames);
        }
    }
    av_packet_free(&pkt);
    if (st == GL_OK && *total == 0)
        st = gl_err_set(err, GL_E_FORMAT, "video: demux: the video stream has no frames");
    return st;
}

// avg_frame_rate (the mean over the stream), else r_frame_rate (the base rate), else 0.
static double stream_fps(const AVStream *st)
{
    AVRational r = st->avg_frame_rate;
    if (r.num <= 0 || r.den <= 0)
        r = st->r_frame_rate;
    if (r.num <= 0 || r.den <= 0)
        return 0.0;
    double f = (double)r.num / (double)r.den;
    return f > 0.0 && f <= 1000.0 ? f : 0.0;
}

// ---- decoding and frame selection --------------------------------------------------------------

struct picker {
    const struct gl_video_limits *lim;
    const struct gl_video_params *par;
    struct gl_video *v;  // indices, n_sampled, n_frames set; grid, size and rgb filled here
    int next;            // next sampled slot to fill
    int64_t frame_no;    // frames decoded so far
    uint64_t decoded_px; // sum of width * height decoded
    AVFrame *last;       // a reference to the last decoded frame (fills slots past the end)
};

// The frame's pixels as 8-bit RGB at its own size (conversion choices in video.h). The
// destination is an AVFrame buffer, aligned and padded as FFmpeg's own, because swscale's SIMD
// converters write whole blocks past the row end.
static gl_status frame_to_rgb(const AVFrame *f, struct gl_image *out, struct gl_err *err)
{
    *out = (struct gl_image){0};
    enum AVPixelFormat fmt = (enum AVPixelFormat)f->format;
    struct SwsContext *sws = sws_getContext(f->width, f->height, fmt, f->width, f->height,
                                            AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
    if (!sws)
        return gl_err_set(err, GL_E_UNSUPPORTED, "video: rgb: cannot convert pixel format %s",
                          av_get_pix_fmt_name(fmt) ? av_get_pix_fmt_name(fmt) : "?");
    int *inv, *table, src_range, dst_range, bright, contrast, sat;
    if (sws_getColorspaceDetails(sws, &inv, &src_range, &table, &dst_range, &bright, &contrast,
                                 &sat) >= 0) {
        const int *coef = sws_getCoefficients(f->colorspace);
        if (f->color_range == AVCOL_RANGE_JPEG)
            src_range = 1;
        else if (f->color_range == AVCOL_RANGE_MPEG)
            src_range = 0;
        // Not applicable (and refused) for RGB sources; the conversion then ignores it.
        (void)sws_setColorspaceDetails(sws, coef, src_range, coef, dst_range, bright, contrast,
                                       sat);
    }
    AVFrame *rgb = av_frame_alloc();
    gl_status st = GL_OK;
    if (rgb) {
        rgb->format = AV_PIX_FMT_RGB24;
        rgb->width = f->width;
        rgb->height = f->height;
    }
    size_t row = 3 * (size_t)f->width;
    if (!rgb || av_frame_get_buffer(rgb, 0) < 0 ||
        !(out->rgb = gl_malloc(row * (size_t)f->height))) {
        st =
            gl_err_set(err, GL_E_NOMEM, "video: rgb: out of memory for %dx%d", f->width, f->height);
    } else if (sws_scale(sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, rgb->data,
                         rgb->linesize) != f->height) {
        st = gl_err_set(err, GL_E_FORMAT, "video: rgb: conversion of a %dx%d %s frame failed",
                        f->width, f->height, av_get_pix_fmt_name(fmt));
    } else {
        for (int y = 0; y < f->height; y++)
            memcpy(out->rgb + row * (size_t)y, rgb->data[0] + (size_t)y * rgb->linesize[0], row);
        out->width = f->width;
        out->height = f->height;
    }
    if (st != GL_OK)
        gl_image_free(out);
    av_frame_free(&rgb);
    sws_freeContext(sws);
    return st;
}

// Converts f, resizes it to the clip's grid and stores it in slot p->next (and in the following
// slots that sample the same frame).
static gl_status store_frame(struct picker *p, const AVFrame *f, struct gl_err *err)
{
    struct gl_video *v = p->v;
    struct gl_image rgb, small;
    gl_status st = frame_to_rgb(f, &rgb, err);
    if (st != GL_OK)
        return st;
    st = gl_image_resize(&rgb, v->width, v->height, &small, err);
    gl_image_free(&rgb);
    if (st != GL_OK)
        return st;
    const size_t bytes = 3 * (size_t)v->width * (size_t)v->height;
    int64_t want = v->indices[p->next];
    do {
        memcpy(v->rgb + bytes * (size_t)p->next, small.rgb, bytes);
        p->next++;
    } while (p->next < v->n_sampled && v->indices[p->next] == want);
    gl_image_free(&small);
    return GL_OK;
}

// The first frame fixes the clip's size, grid and output buffer.
static gl_status first_frame(struct picker *p, const AVFrame *f, struct gl_err *err)
{
    struct gl_video *v = p->v;
    v->src_width = f->width;
    v->src_height = f->height;
    gl_status st = gl_image_grid(f->width, f->height, p->par->max_frame_tokens, &v->grid, err);
    if (st != GL_OK)
        return st;
    v->width = v->grid.gw * GL_IMAGE_UNIT;
    v->height = v->grid.gh * GL_IMAGE_UNIT;
    v->rgb = gl_malloc(3 * (size_t)v->width * (size_t)v->height * (size_t)v->n_frames);
    if (!v->rgb)
        return gl_err_set(err, GL_E_NOMEM, "video: out of memory for %d frames of %dx%d",
                          v->n_frames, v->width, v->height);
    return GL_OK;
}

static gl_status take_frame(struct picker *p, AVFrame *f, struct gl_err *err)
{
    const struct gl_video_limits *lim = p->lim;
    if (f->width < 1 || f->height < 1 || f->width > lim->max_side || f->height > lim->max_side ||
        (uint64_t)f->width * (uint64_t)f->height > lim->max_pixels)
        return gl_err_set(err, GL_E_LIMIT,
                          "video: limit: frame %lld is %dx%d (at most %d px a side, %llu px)",
                          (long long)p->frame_no, f->width, f->height, lim->max_side,
                          (unsigned long long)lim->max_pixels);
    gl_status st = GL_OK;
    if (p->frame_no == 0)
        st = first_frame(p, f, err);
    else if (f->width != p->v->src_width || f->height != p->v->src_height)
        st = gl_err_set(
            err, GL_E_UNSUPPORTED, "video: decode: frame %lld is %dx%d, the clip started at %dx%d",
            (long long)p->frame_no, f->width, f->height, p->v->src_width, p->v->src_height);
    p->decoded_px += (uint64_t)f->width * (uint64_t)f->height;
    if (st == GL_OK && p->decoded_px > lim->max_decode_pixels)
        st = gl_err_set(err, GL_E_LIMIT, "video: limit: more than %llu pixels to decode",
                        (unsigned long long)lim->max_decode_pixels);
    if (st == GL_OK && p->next < p->v->n_sampled && p->v->indices[p->next] == p->frame_no)
        st = store_frame(p, f, err);
    if (st == GL_OK) {
        av_frame_unref(p->last);
        if (av_frame_ref(p->last, f) < 0)
            st = gl_err_set(err, GL_E_NOMEM, "video: decode: out of memory");
    }
    p->frame_no++;
    return st;
}

// Sends pkt (NULL = flush) and takes every frame the decoder has ready.
static gl_status decode_packet(struct picker *p, AVCodecContext *cc, const AVPacket *pkt,
                               AVFrame *f, struct gl_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    int ret = avcodec_send_packet(cc, pkt);
    if (ret < 0 && ret != AVERROR_EOF)
        return gl_err_set(err, ret == AVERROR(ENOMEM) ? GL_E_NOMEM : GL_E_FORMAT,
                          "video: decode: frame %lld: %s", (long long)p->frame_no, av_msg(ret, eb));
    for (;;) {
        ret = avcodec_receive_frame(cc, f);
        if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF)
            return GL_OK;
        if (ret < 0)
            return gl_err_set(err, ret == AVERROR(ENOMEM) ? GL_E_NOMEM : GL_E_FORMAT,
                              "video: decode: frame %lld: %s", (long long)p->frame_no,
                              av_msg(ret, eb));
        gl_status st = take_frame(p, f, err);
        av_frame_unref(f);
        if (st != GL_OK || p->next == p->v->n_sampled)
            return st;
    }
}

static gl_status open_decoder(const AVStream *s, const struct gl_video_limits *lim,
                              AVCodecContext **out, struct gl_err *err)
{
    char eb[AV_ERROR_MAX_STRING_SIZE];
    const AVCodecParameters *cp = s->codecpar;
    *out = NULL;
    if (cp->width > lim->max_side || cp->height > lim->max_side ||
        (uint64_t)(cp->width > 0 ? cp->width : 0) * (uint64_t)(cp->height > 0 ? cp->height : 0) >
            lim->max_pixels)
        return gl_err_set(err, GL_E_LIMIT, "video: limit: the stream is %dx%d", cp->width,
                          cp->height);
    const AVCodec *codec = avcodec_find_decoder(cp->codec_id);
    if (!codec)
        return gl_err_set(err, GL_E_UNSUPPORTED, "video: decode: no decoder for codec %s",
                          avcodec_get_name(cp->codec_id));
    AVCodecContext *cc = avcodec_alloc_context3(codec);
    if (!cc)
        return gl_err_set(err, GL_E_NOMEM, "video: decode: out of memory");
    int ret = avcodec_parameters_to_context(cc, cp);
    cc->pkt_timebase = s->time_base;
    cc->thread_count = 1; // requests already run in parallel; frame threads would multiply memory
    cc->max_pixels = (int64_t)lim->max_pixels;
    if (ret >= 0)
        ret = avcodec_open2(cc, codec, NULL);
    if (ret < 0) {
        avcodec_free_context(&cc);
        return gl_err_set(err, GL_E_FORMAT, "video: decode: cannot open the %s decoder: %s",
                          avcodec_get_name(cp->codec_id), av_msg(ret, eb));
    }
    *out = cc;
    return GL_OK;
}

// Second pass: decodes from the start until every sampled slot is filled. Slots whose frame the
// decoder never produced (a stream with fewer decodable frames than packets) repeat the last
// decoded frame.
static gl_status decode_sampled(struct demux *d, const struct gl_video_limits *lim,
                                const struct gl_video_params *par, struct gl_video *v,
                                struct gl_err *err)
{
    AVCodecContext *cc = NULL;
    gl_status st = open_decoder(d->st, lim, &cc, err);
    if (st != GL_OK)
        return st;
    struct picker p = {.lim = lim, .par = par, .v = v, .last = av_frame_alloc()};
    AVPacket *pkt = av_packet_alloc();
    AVFrame *f = av_frame_alloc();
    if (!pkt || !f || !p.last)
        st = gl_err_set(err, GL_E_NOMEM, "video: decode: out of memory");
    int got = 1;
    while (st == GL_OK && got && p.next < v->n_sampled) {
        st = next_packet(d, pkt, p.frame_no, &got, err);
        if (st == GL_OK)
            st = decode_packet(&p, cc, got ? pkt : NULL, f, err);
        av_packet_unref(pkt);
    }
    if (st == GL_OK && p.next < v->n_sampled) {
        if (p.frame_no == 0)
            st = gl_err_set(err, GL_E_FORMAT, "video: decode: no frame could be decoded");
        else
            while (st == GL_OK && p.next < v->n_sampled)
                st = store_frame(&p, p.last, err);
    }
    av_frame_free(&p.last);
    av_frame_free(&f);
    av_packet_free(&pkt);
    avcodec_free_context(&cc);
    return st;
}

// ---- the pipeline ------------------------------------------------------------------------------

static gl_status check_params(const struct gl_video_params *par, struct gl_err *err)
{
    if (!(par->fps > 0.0 && par->fps <= 1000.0))
        return gl_err_set(err, GL_E_INVAL, "video: fps %g outside (0, 1000]", par->fps);
    if (par->max_frames < 1 || par->max_frames > GL_VIDEO_MAX_FRAMES_LIMIT)
        return gl_err_set(err, GL_E_INVAL, "video: max frames %d outside 1..%d", par->max_frames,
                          GL_VIDEO_MAX_FRAMES_LIMIT);
    if (par->max_frame_tokens < 1 || par->max_frame_tokens > GL_IMAGE_MAX_TOKENS_LIMIT)
        return gl_err_set(err, GL_E_INVAL, "video: max frame tokens %d outside 1..%d",
                          par->max_frame_tokens, GL_IMAGE_MAX_TOKENS_LIMIT);
    // Bounds the output: 2^17 merged tokens are 103 Mpx, 308 MB of RGB (96 x 144 is 13824).
    if ((int64_t)par->max_frames * par->max_frame_tokens > GL_VIDEO_MAX_CLIP_TOKENS)
        return gl_err_set(err, GL_E_INVAL, "video: %d frames x %d tokens is over %d tokens",
                          par->max_frames, par->max_frame_tokens, GL_VIDEO_MAX_CLIP_TOKENS);
    return GL_OK;
}

// From the stream's frame count and fps: the sampled indices, padded count and timestamps.
static gl_status plan_sampling(struct gl_video *v, const struct gl_video_params *par,
                               const struct gl_video_limits *lim, uint64_t frame_px,
                               struct gl_err *err)
{
    if ((double)v->total_frames / v->src_fps > lim->max_duration_s)
        return gl_err_set(err, GL_E_LIMIT, "video: limit: %.1f s is longer than %.0f s",
                          (double)v->total_frames / v->src_fps, lim->max_duration_s);
    v->n_sampled = gl_video_sample_count(v->total_frames, v->src_fps, par->fps, par->max_frames);
    v->n_frames = (v->n_sampled + GL_VIDEO_TEMPORAL - 1) / GL_VIDEO_TEMPORAL * GL_VIDEO_TEMPORAL;
    const int groups = v->n_frames / GL_VIDEO_TEMPORAL;
    v->indices = gl_malloc(sizeof(int64_t) * (size_t)v->n_sampled);
    v->timestamps = gl_malloc(sizeof(double) * (size_t)groups);
    if (!v->indices || !v->timestamps)
        return gl_err_set(err, GL_E_NOMEM, "video: out of memory");
    gl_video_sample_indices(v->total_frames, v->n_sampled, v->indices);
    // Decoding runs to the last sampled frame: refuse up front what would break the budget.
    uint64_t upto = (uint64_t)v->indices[v->n_sampled - 1] + 1, px;
    if (frame_px && (!gl_mul_ok(upto, frame_px, &px) || px > lim->max_decode_pixels))
        return gl_err_set(err, GL_E_LIMIT,
                          "video: limit: decoding %llu frames of %llu px is over %llu px",
                          (unsigned long long)upto, (unsigned long long)frame_px,
                          (unsigned long long)lim->max_decode_pixels);
    // HF: metadata.timestamps[::2], each float32(index) / float32(fps) (see video.h).
    for (int g = 0; g < groups; g++)
        v->timestamps[g] = (double)((float)v->indices[GL_VIDEO_TEMPORAL * g] / (float)v->src_fps);
    return GL_OK;
}

static gl_status run(const uint8_t *data, size_t n, const struct gl_video_limits *lim,
                     const struct gl_video_params *par, struct gl_video *v, struct gl_err *err)
{
    struct demux d;
    gl_status st = demux_open(&d, data, n, err);
    if (st != GL_OK)
        return st;
    const AVCodecParameters *cp = d.st->codecpar;
    uint64_t frame_px = cp->width > 0 && cp->height > 0 ? (uint64_t)cp->width * cp->height : 0;
    double fps = stream_fps(d.st);
    v->fps_known = fps > 0.0;
    v->src_fps = v->fps_known ? fps : GL_VIDEO_DEFAULT_FPS;
    st = count_frames(&d, lim, &v->total_frames, err);
    demux_close(&d);
    if (st == GL_OK)
        st = plan_sampling(v, par, lim, frame_px, err);
    if (st == GL_OK)
        st = demux_open(&d, data, n, err);
    if (st == GL_OK) {
        st = decode_sampled(&d, lim, par, v, err);
        demux_close(&d);
    }
    return st;
}

gl_status gl_video_preprocess(const uint8_t *data, size_t n, const struct gl_video_limits *lim,
                              const struct gl_video_params *par, struct gl_video *out,
                              struct gl_err *err)
{
    *out = (struct gl_video){0};
    pthread_once(&log_once, quiet_ffmpeg);
    struct gl_video_limits dl = gl_video_default_limits();
    struct gl_video_params dp = gl_video_default_params();
    lim = lim ? lim : &dl;
    par = par ? par : &dp;
    gl_status st = check_params(par, err);
    if (st != GL_OK)
        return st;
    if (n == 0 || !data)
        return gl_err_set(err, GL_E_FORMAT, "video: open: empty input");
    if (n > lim->max_bytes)
        return gl_err_set(err, GL_E_LIMIT, "video: limit: %zu bytes is over %zu", n,
                          lim->max_bytes);
    st = run(data, n, lim, par, out, err);
    if (st != GL_OK)
        gl_video_free(out);
    else
        GL_ASSERT(out->rgb && out->n_sampled >= 1);
    // Padding to whole temporal patches repeats the last sampled frame (HF patchify).
    if (st == GL_OK && out->n_frames > out->n_sampled) {
        const size_t bytes = 3 * (size_t)out->width * (size_t)out->height;
        for (int i = out->n_sampled; i < out->n_frames; i++)
            memcpy(out->rgb + bytes * (size_t)i, out->rgb + bytes * (size_t)(out->n_sampled - 1),
                   bytes);
    }
    return st;
}
