// graph.cu: the device-graph calls the driver provides (issue 35: undefined references
// before): a conditional WHILE node whose body kernel ends the loop with
// cudaGraphSetConditional, a graph launched from the device (cudaGraphLaunch), and a node
// of that graph updated from the device (cudaGraphKernelNodeSetParam, SetGridDim,
// SetEnabled) before its launch. One line per part, each with what it counted; exit 1 when
// a count is off.
#include <cstdio>
#include <cuda_runtime.h>
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    std::printf("graph: ERROR %s: %s\n", #x, cudaGetErrorString(e_)); return 1; } } while (0)
__global__ void loop_body(int *count, int *iters, cudaGraphConditionalHandle h)
{
    ++*iters;
    if (--*count == 0) cudaGraphSetConditional(h, 0);
}
__global__ void bump(int *v, int by) { atomicAdd(v, by); }
__global__ void launcher(cudaGraphExec_t g) { cudaGraphLaunch(g, cudaStreamGraphFireAndForget); }
__global__ void updater(cudaGraphDeviceNode_t node, cudaGraphExec_t g, int by, int enable)
{
    cudaGraphKernelNodeSetParam(node, sizeof(int *), &by, sizeof by);
    cudaGraphKernelNodeSetGridDim(node, dim3(3, 1, 1));
    cudaGraphKernelNodeSetEnabled(node, enable != 0);
    cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
}
static cudaGraphNode_t kernel_node(cudaGraph_t g, void *fn, void **args)
{
    cudaKernelNodeParams k = {};
    k.func = fn; k.gridDim = dim3(1); k.blockDim = dim3(1); k.kernelParams = args;
    cudaGraphNode_t n = nullptr;
    if (cudaGraphAddKernelNode(&n, g, nullptr, 0, &k) != cudaSuccess) return nullptr;
    return n;
}
int main()
{
    int *d; CHECK(cudaMalloc(&d, 4 * sizeof(int)));
    int h[4] = {7, 0, 0, 0};
    CHECK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    cudaStream_t s; CHECK(cudaStreamCreate(&s));
    // a WHILE node: the body runs until it sets the condition to 0 (7 times)
    cudaGraph_t g; CHECK(cudaGraphCreate(&g, 0));
    cudaGraphConditionalHandle cond;
    CHECK(cudaGraphConditionalHandleCreate(&cond, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams cp = {cudaGraphNodeTypeConditional};
    cp.conditional.handle = cond; cp.conditional.type = cudaGraphCondTypeWhile; cp.conditional.size = 1;
    cudaGraphNode_t cn; CHECK(cudaGraphAddNode(&cn, g, nullptr, nullptr, 0, &cp));
    int *count = d, *iters = d + 1;
    void *la[] = {&count, &iters, &cond};
    if (!kernel_node(cp.conditional.phGraph_out[0], (void *)loop_body, la)) { std::printf("graph: ERROR body node\n"); return 1; }
    cudaGraphExec_t ge; CHECK(cudaGraphInstantiate(&ge, g, 0));
    CHECK(cudaGraphLaunch(ge, s)); CHECK(cudaStreamSynchronize(s));
    // a graph launched from the device, three times; then its node updated from the device
    int *v = d + 2, one = 1;
    void *ba[] = {&v, &one};
    cudaGraph_t inner; CHECK(cudaGraphCreate(&inner, 0));
    cudaGraphNode_t bn = kernel_node(inner, (void *)bump, ba);
    if (!bn) { std::printf("graph: ERROR bump node\n"); return 1; }
    cudaLaunchAttributeValue av = {};
    av.deviceUpdatableKernelNode.deviceUpdatable = 1;
    CHECK(cudaGraphKernelNodeSetAttribute(bn, cudaLaunchAttributeDeviceUpdatableKernelNode, &av));
    CHECK(cudaGraphKernelNodeGetAttribute(bn, cudaLaunchAttributeDeviceUpdatableKernelNode, &av));
    cudaGraphDeviceNode_t dn = av.deviceUpdatableKernelNode.devNode;
    cudaGraphExec_t ie; CHECK(cudaGraphInstantiate(&ie, inner, cudaGraphInstantiateFlagDeviceLaunch));
    CHECK(cudaGraphUpload(ie, s));
    cudaGraph_t outer; CHECK(cudaGraphCreate(&outer, 0));
    void *oa[] = {&ie};
    if (!kernel_node(outer, (void *)launcher, oa)) { std::printf("graph: ERROR launcher node\n"); return 1; }
    cudaGraphExec_t oe; CHECK(cudaGraphInstantiate(&oe, outer, 0));
    for (int r = 0; r < 3; r++) { CHECK(cudaGraphLaunch(oe, s)); CHECK(cudaStreamSynchronize(s)); }
    int launched[4]; CHECK(cudaMemcpy(launched, d, sizeof launched, cudaMemcpyDeviceToHost));
    // the update: bump by 5 on 3 blocks, enabled (+15); then disabled (+0)
    cudaGraph_t up; CHECK(cudaGraphCreate(&up, 0));
    int by = 5, enable = 1;
    void *ua[] = {&dn, &ie, &by, &enable};
    cudaGraphNode_t un = kernel_node(up, (void *)updater, ua);
    if (!un) { std::printf("graph: ERROR updater node\n"); return 1; }
    cudaGraphExec_t ue; CHECK(cudaGraphInstantiate(&ue, up, 0));
    CHECK(cudaGraphLaunch(ue, s)); CHECK(cudaStreamSynchronize(s));
    cudaKernelNodeParams kp = {}; enable = 0;
    void *ua2[] = {&dn, &ie, &by, &enable};
    kp.func = (void *)updater; kp.gridDim = dim3(1); kp.blockDim = dim3(1); kp.kernelParams = ua2;
    CHECK(cudaGraphExecKernelNodeSetParams(ue, un, &kp));
    CHECK(cudaGraphLaunch(ue, s)); CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    bool ok = launched[1] == 7 && launched[0] == 0 && launched[2] == 3 && h[2] == 18;
    std::printf("graph: while loop ran %d times (7), device-launched graph counted %d (3), "
                "after the device's update %d (18): %s\n", launched[1], launched[2], h[2], ok ? "ok" : "WRONG");
    return !ok;
}
