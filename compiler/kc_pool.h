/* kc_pool.h — the windowed vector engine of kc_pool.c (internal to compiler/): besides the
 * pooling kernels, the depthwise convolution gradients, which kc_convgrad.c hands to it. */
#ifndef NPUSIM_KC_POOL_H
#define NPUSIM_KC_POOL_H

#include <stdbool.h>

#include "kernel.h"

/* conv2d_grad_input (wgrad false: dy, w -> dx) or conv2d_grad_weight (x, dy -> dw) of a
 * depthwise convolution (groups = channels = outputs), on the vector unit: per output row and
 * tap a multiply by w's tap (input gradient, added into a padded fp32 dx) or by dy and a
 * column sum (weight gradient, summed over the images). The kernel's attributes are the
 * convolution's (stride, stride_w, pad, pad_w, dilation, dilation_w). Returns kc_status. */
np_status kc_depthwise_grad(kc_ctx *x, bool wgrad);

#endif
