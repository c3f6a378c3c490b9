// Built when the configure found no cuDNN 9: the CUDA kernel table has no whole GRU layer, and
// graph/ runs every GRU layer through Tern's step kernels (tensor/ops.h WholeGruLayers).
#include "tensor/cuda/cuda_kernels.h"

namespace tern::cuda {

GruLayerFn CudnnGruLayer() { return nullptr; }
GruLayerBackwardFn CudnnGruLayerBackward() { return nullptr; }

}  // namespace tern::cuda
