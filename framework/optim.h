/* optim.h — optimizers as graph ops (see optim.c for the update rules). */
#ifndef NPUSIM_OPTIM_H
#define NPUSIM_OPTIM_H

#include "nn.h"

typedef enum nn_optim_kind { NN_OPTIM_SGD, NN_OPTIM_ADAM, NN_OPTIM_ADAMW } nn_optim_kind;

typedef struct nn_optim {
    nn_optim_kind kind;
    double lr;
    double momentum;     /* SGD */
    double beta1, beta2; /* Adam, AdamW */
    double eps;
    double weight_decay;
} nn_optim;

/* Appends an update op for every trainable parameter that has a gradient (call after
 * nn_backward), with zero-initialized f32 state leaves (role optimizer_state) named
 * "<param>.momentum", "<param>.adam_m", "<param>.adam_v". The updates are graph outputs. */
np_status nn_optim_step(nn_graph *g, const nn_optim *opt, np_err *err);

#endif
