/* layer_model.h — a zoo model's layers as a SCALE-Sim topology, for `npusim layer --model`:
 * every convolution and every linear layer (a matmul by a trainable weight) of the model's
 * forward pass, in order, named by the layer's scope ("layer1.0.conv1", "h.3.mlp.c_fc").
 *
 * A convolution of output E x F with stride s and an R x S filter becomes SCALE-Sim's
 * unpadded convolution on an input of (E - 1) x s + R rows and (F - 1) x s + S columns (the
 * padded input its windows read), so that SCALE-Sim's output size is the layer's; a grouped
 * convolution becomes one convolution per group (a depthwise one, one per channel, as SCALE-
 * Sim's "DP" rows do). At batch B > 1 a convolution is its GEMM (M = B x E x F). A linear
 * layer is the GEMM M = the rows of its input, N = its outputs, K = its inputs. */
#ifndef NPUSIM_LAYER_MODEL_H
#define NPUSIM_LAYER_MODEL_H

#include <stdint.h>

#include "err.h"
#include "mxu_topo.h"

/* Builds model name_or_path (the zoo or a model file) at batch (>= 1) and fills *out (free
 * with mxu_topology_free). NP_ERR_RANGE for a dilated convolution or more layers than a
 * topology holds; the model's own errors otherwise. */
np_status layer_model_topology(const char *name_or_path, int64_t batch, mxu_topology *out,
                               np_err *err);

#endif
