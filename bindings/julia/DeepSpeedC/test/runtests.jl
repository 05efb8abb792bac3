# Runtime tests of DeepSpeedC against a built libdeepspeed_c. Run with
#   DEEPSPEED_C_LIB=<build>/libdeepspeed_c.so julia --project=bindings/julia/DeepSpeedC -e 'using Pkg; Pkg.test()'
# (without DEEPSPEED_C_LIB, the repository's build/ directory is tried).
# NOTE: no Julia runtime exists on the project's machines, so this file has only
# been checked statically there (parsed by tree-sitter-julia); see the README.

let repo_lib = joinpath(@__DIR__, "..", "..", "..", "..", "build", "libdeepspeed_c.so")
    if !haskey(ENV, "DEEPSPEED_C_LIB") && isfile(repo_lib)
        ENV["DEEPSPEED_C_LIB"] = abspath(repo_lib)
    end
end

using Test
using DeepSpeedC
const L = DeepSpeedC.LibDeepSpeedC

# gradient_clipping 0: DeepSpeed's default (1.0) would clip the test gradient first.
const ADAMW = """{
  "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "gradient_clipping": 0.0,
  "optimizer": {"type": "AdamW", "params": {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8,
                                            "weight_decay": 0.01}}
}"""

@testset "DeepSpeedC" begin

@testset "library" begin
    @test DeepSpeedC.version() == VersionNumber(L.DS_VERSION_MAJOR, L.DS_VERSION_MINOR, L.DS_VERSION_PATCH)
    @test occursin("\"version\"", DeepSpeedC.build_info())
    # Struct sizes as the header freezes them (Julia lays isbits structs out as C).
    @test sizeof(L.ds_engine_options_t) == L.DS_ENGINE_OPTIONS_SIZE_V0
    @test sizeof(L.ds_step_info_t) == L.DS_STEP_INFO_SIZE_V0
    @test sizeof(L.ds_param_info_t) == L.DS_PARAM_INFO_SIZE_V0
    @test sizeof(L.ds_comm_options_t) == L.DS_COMM_OPTIONS_SIZE_V0
    @test sizeof(L.ds_memory_report_t) == L.DS_MEMORY_REPORT_SIZE_V0
    @test sizeof(L.ds_pipe_info_t) == L.DS_PIPE_INFO_SIZE_V0
    @test sizeof(L.DLTensor) == 48
end

@testset "errors carry status and message" begin
    err = try
        Engine("""{"train_micro_batch_size_per_gpu": 1, "optimizr": {}}""")
        nothing
    catch e
        e
    end
    @test err isa DeepSpeedError
    @test err.status == L.DS_ERR_INVALID_CONFIG
    @test occursin("optimizr", err.message)
    @test occursin("DS_ERR_INVALID_CONFIG", sprint(showerror, err))

    e = Engine(ADAMW)
    for stream in (C_NULL, Ptr{Cvoid}(0x1234))  # a CPU engine has no CUDA stream
        err = try
            set_stream!(e, stream)
            nothing
        catch x
            x
        end
        @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_STATE
        @test err isa DeepSpeedError && occursin("trains on the CPU", err.message)
    end
    err = try
        Engine(ADAMW; stream = Ptr{Cvoid}(0x1))  # a stream belongs to an engine on a GPU
        nothing
    catch x
        x
    end
    @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_ARGUMENT
    @test err isa DeepSpeedError && occursin("options.cuda_stream", err.message)
    close(e)
    close(e)  # idempotent
    err = try
        DeepSpeedC.global_steps(e)
        nothing
    catch x
        x
    end
    @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_HANDLE
    @test_throws ArgumentError Engine("{\"a\"\0: 1}")  # embedded NUL refused before the call
end

@testset "one AdamW step against the formula (column-major gradient)" begin
    e = Engine(ADAMW)
    W0 = Float32[0.5 -1.0 0.25 2.0; 1.5 0.75 -0.5 -2.0; 0.1 0.2 0.3 -0.4]  # 3x4: torch shape (3, 4)
    b0 = Float32[0.1, -0.2, 0.3]
    add_param!(e, "W", W0)
    add_param!(e, "b", b0)
    init!(e)
    @test keys(e) == ["W", "b"]
    @test named_parameters(e)[1].shape == [3, 4]
    v = param(e, "W")
    @test size(v) == (3, 4)
    @test Array(v) == W0  # the row-major view reads back with the same indices
    G = Float32[1 -2 3 -4; -5 6 -7 8; 9 -10 11 -12] ./ 10
    gb = Float32[-0.5, 0.25, 1.0]
    accumulate_grad!(e, "W", G)  # strides (1, 3): no copy on the Julia side
    accumulate_grad!(e, "b", gb)
    @test get_full_grad(e, "W") == G
    backward!(e)
    info = step!(e)
    @test info.stepped && !info.skipped && info.global_step == 1
    lr_, b1, b2, eps, wd = 0.1, 0.9, 0.999, 1e-8, 0.01
    function adamw1(p, g)  # first step, float64: m = (1-b1) g, v = (1-b2) g^2, bias-corrected
        p, g = Float64(p), Float64(g)
        mhat = (1 - b1) * g / (1 - b1)
        vhat = (1 - b2) * g^2 / (1 - b2)
        return p * (1 - lr_ * wd) - lr_ * mhat / (sqrt(vhat) + eps)
    end
    @test isapprox(Float64.(get_full_fp32_param(e, "W")), adamw1.(W0, G); rtol = 1e-5)
    @test isapprox(Float64.(get_full_fp32_param(e, "b")), adamw1.(b0, gb); rtol = 1e-5)
    @test isapprox(Float64.(Array(param(e, "W"))), adamw1.(W0, G); rtol = 1e-5)
    @test isapprox(Float64.(get_full_optimizer_state(e, "W", "exp_avg")), (1 - b1) .* Float64.(G); rtol = 1e-5)
    # ZeRO 0: the view taken before the step aliases the engine's weights and shows the update.
    @test isapprox(Float64.(Array(v)), adamw1.(W0, G); rtol = 1e-5)
    close(e)
    @test_throws DeepSpeedError v[1, 1]  # a view refuses to be read once its engine is closed
end

@testset "host-driven regression: the loss falls" begin
    cfg = """{"train_micro_batch_size_per_gpu": 16, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "Adam", "params": {"lr": 0.05}}}"""
    e = Engine(cfg)
    Wtrue = Float32[1 -2 0.5 3; -1 0.5 2 -0.5]  # 2x4 = Linear(4, 2).weight
    add_param!(e, "W", zeros(Float32, 2, 4))
    init!(e)
    X = Float32[sin(0.37i + 1.3j) for i in 1:4, j in 1:16]  # features x batch
    Y = Wtrue * X
    losses = Float64[]
    for _ in 1:100
        W = Array(param(e, "W"))
        R = W * X - Y
        push!(losses, sum(abs2, R) / length(R))
        dW = Float32(2 / length(R)) .* (R * X')  # d mean(R^2) / dW, shape 2x4
        accumulate_grad!(e, "W", dW)
        backward!(e)
        step!(e)
    end
    @test losses[end] < 0.05 * losses[1]
    @test DeepSpeedC.global_steps(e) == 100
    mr = memory_report(e)
    @test mr.total_bytes > 0 && mr.peak_total_bytes >= mr.total_bytes
    @test disk_report(e).total_bytes == 0   # nothing on disk without NVMe offload
    close(e)
end

@testset "built-in model: forward / backward! / step!" begin
    spec = """{"type": "sequential", "loss": "mse", "seed": 7,
               "layers": [{"type": "linear", "in_features": 4, "out_features": 16},
                          {"type": "gelu"},
                          {"type": "linear", "in_features": 16, "out_features": 2}]}"""
    cfg = """{"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"""
    model = Model(spec)
    e = Engine(cfg, model)
    close(model)  # the engine keeps the model alive
    X = Float32[cos(0.3i + 0.7j) for i in 1:8, j in 1:4]  # (batch, in): torch's [B, in]
    Y = Float32[sum(X[i, :]) * (k == 1 ? 1 : -1) for i in 1:8, k in 1:2]
    first_loss = forward(e, X, Y)
    backward!(e)
    step!(e)
    loss = first_loss
    for _ in 1:60
        loss = forward(e, X, Y)
        backward!(e)
        step!(e)
    end
    @test loss < 0.5 * first_loss
    out = zeros(Float32, 8, 2)
    eval!(e)
    forward!(e, out, X)
    @test isapprox(sum(abs2, out - Y) / length(Y), forward(e, X, Y); rtol = 1e-4)
    train!(e)
    close(e)
end

@testset "checkpoint round trip and the log callback" begin
    dir = mktempdir()
    e = Engine(ADAMW)
    add_param!(e, "W", Float32[1 2; 3 4])
    init!(e)
    accumulate_grad!(e, "W", Float32[0.1 -0.2; 0.3 -0.4])
    backward!(e)
    step!(e)
    saved = get_full_fp32_param(e, "W")
    save_checkpoint(e, dir; tag = "t1", client_state = """{"epoch": 3}""")
    set_full_fp32_param!(e, "W", zeros(Float32, 2, 2))
    @test get_full_fp32_param(e, "W") == zeros(Float32, 2, 2)
    cs = load_checkpoint!(e, dir)
    @test occursin("\"epoch\"", cs) && occursin("3", cs)
    @test get_full_fp32_param(e, "W") == saved
    @test DeepSpeedC.global_steps(e) == 1
    close(e)

    # A non-strict load logs a warning naming the parameter the checkpoint lacks.
    messages = Tuple{Int,String}[]
    e2 = Engine(ADAMW; log = (level, msg) -> push!(messages, (level, msg)), log_level = L.DS_LOG_INFO)
    add_param!(e2, "W", zeros(Float32, 2, 2))
    add_param!(e2, "extra", zeros(Float32, 3))
    init!(e2)
    load_checkpoint!(e2, dir; strict = false)
    @test get_full_fp32_param(e2, "W") == saved
    @test any(m -> m[1] == L.DS_LOG_WARN && occursin("extra", m[2]), messages)
    close(e2)
    rm(dir; recursive = true)
end

@testset "communicator, 16-bit export, estimators" begin
    c = Comm(backend = :local)
    @test DeepSpeedC.rank(c) == 0 && world_size(c) == 1
    e = Engine(ADAMW; comm = c)
    close(c)  # the engine keeps its own reference
    @test world_size(e) == 1 && DeepSpeedC.rank(e) == 0
    err = try
        Engine(ADAMW; comm = c)
        nothing
    catch x
        x
    end
    @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_HANDLE
    add_param!(e, "W", ones(Float32, 2, 3))
    add_param!(e, "frozen", ones(Float32, 4); trainable = false)
    init!(e)
    @test [p.trainable for p in named_parameters(e)] == [true, false]
    dir = mktempdir()
    save_16bit_model(e, dir)
    @test isfile(joinpath(dir, "model.safetensors"))
    close(e)
    rm(dir; recursive = true)
    # DeepSpeed's ZeRO-2 estimate, one GPU: cpu = 4P * 1 * 1.5, gpu = 2P + 18P.
    est = DeepSpeedC.estimate_zero2_mem(10^6)
    @test est.cpu_bytes == 6_000_000 && est.gpu_bytes == 20_000_000
end

@testset "ds_convert" begin
    src = Float32[1.0, -2.5, 3.140625]
    h = zeros(Float16, 3)
    convert_elements!(h, src)
    @test h == Float16.(src)
    b = Array{BFloat16}(undef, 3)
    convert_elements!(b, src)
    @test Float32.(b) == src  # exactly representable in bfloat16
end


@testset "pipeline schedules against DeepSpeed's fixtures" begin
    fixture = joinpath(@__DIR__, "..", "..", "..", "..", "tests", "data", "pipe", "schedules.txt")
    kinds = Dict("train" => :train, "inference" => :inference, "data_parallel" => :data_parallel)
    blocks = 0
    s = nothing
    want = String[]
    for line in eachline(fixture)
        f = split(line)
        isempty(f) && continue
        if f[1] == "S"
            n = [parse(Int, x) for x in f[3:end]]  # stages, micro_batches, stage_id, buffers, steps
            s = PipeSchedule(kinds[f[2]], n[2], n[1], n[3])
            @test num_buffers(s) == n[4]
            @test num_steps(s) == n[5]
            want = String[]
        elseif f[1] == "I"
            push!(want, line[3:end])
        elseif f[1] == "E"
            got = ["$(i.step) $(i.op) $(i.buffer_id) $(i.micro_batch)" for i in s]
            @test got == want
            @test ["$(i.step) $(i.op) $(i.buffer_id) $(i.micro_batch)" for i in s] == want  # starts over
            by_step = ["$(i.step) $(i.op) $(i.buffer_id) $(i.micro_batch)"
                       for st in 0:(num_steps(s) - 1) for i in step_instrs(s, st)]
            @test by_step == want
            close(s)
            blocks += 1
        end
    end
    @test blocks > 100
    @test_throws DeepSpeedError PipeSchedule(:train, 4, 2, 2)
end

@testset "stage boundaries against DeepSpeed's fixtures" begin
    fixture = joinpath(@__DIR__, "..", "..", "..", "..", "tests", "data", "pipe", "partitions.txt")
    cases = 0
    method, stages, layers = "", 0, 0
    counts, names = nothing, nothing
    for line in eachline(fixture)
        f = split(line)
        isempty(f) && continue
        if f[1] == "P"
            method, stages, layers = String(f[2]), parse(Int, f[3]), parse(Int, f[4])
            counts, names = nothing, nothing
        elseif f[1] == "W"
            counts = [parse(Int64, x) for x in f[2:end]]
        elseif f[1] == "N"
            names = String.(f[2:end])
        elseif f[1] == "R"
            want = [parse(Int, x) for x in f[2:end]]
            @test partition_layers(method, stages; num_layers = layers, param_counts = counts,
                                   type_names = names) == want
            cases += 1
        end
    end
    @test cases >= 100
    @test_throws DeepSpeedError partition_layers("type:moe", 2; type_names = ["Embedding", "Linear"])
    @test_throws DeepSpeedError partition_layers("profile", 2; num_layers = 3)
end

@testset "collectives on a world of one" begin
    c = Comm(backend = :local)
    x = Float32[1.5, -2.0, 3.25, 4.0]
    for op in (:sum, :avg, :max)
        @test all_reduce!(c, copy(x); op = op) == x
    end
    @test all_gather_into_tensor!(c, zeros(Float32, 4), reshape(copy(x), 2, 2)) == x
    @test reduce_scatter_tensor!(c, zeros(Float32, 4), x) == x
    @test all_to_all_single!(c, zeros(Float32, 4), x) == x
    @test broadcast!(c, copy(x), 0) == x
    @test barrier(c) === nothing
    @test_throws DeepSpeedError all_gather_into_tensor!(c, zeros(Float32, 3), x)
    @test_throws DeepSpeedError all_reduce!(c, Int32[1, 2]; op = :avg)
    @test_throws ArgumentError all_reduce!(c, x; op = :min)
    @test_throws DeepSpeedError broadcast!(c, x, 1)
    close(c)
end

@testset "topology round trips, split, offload around an evaluation" begin
    t = pipe_model_data_topology(2, 3, 2)  # dims pipe 2, data 2, model 3
    @test topology_axes(t) == ["pipe" => 2, "data" => 2, "model" => 3]
    for r in 0:11
        c = coord_of(t, r)
        @test c == [div(r, 6), div(r, 3) % 2, r % 3]  # the last axis varies fastest
        @test rank_of(t, c) == r
    end
    @test axis_comm_lists(t, "model") == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]
    @test filter_match(t; pipe = 1, model = 2) == [8, 11]
    @test rank_repr(t, 5) == "model_02"
    @test get_dim(t, "expert") == 0
    @test_throws DeepSpeedError rank_of(t, [0, 2, 0])
    world = Comm(backend = :local)
    sub = split(world, 0)
    @test world_size(sub) == 1
    @test split(world, -1) === nothing
    @test world_size(comm(pipe_data_topology(1, 1), "pipe", world)) == 1
    @test_throws DeepSpeedError pipe_send(world, Float32[1, 2], 0)     # the peer is this rank
    @test_throws DeepSpeedError pipe_recv!(world, zeros(Float32, 2), 1)  # no such rank

    spec = """{"type": "sequential", "loss": "mse", "seed": 3,
               "layers": [{"type": "linear", "in_features": 3, "out_features": 8}, {"type": "gelu"},
                          {"type": "linear", "in_features": 8, "out_features": 2}]}"""
    cfg = """{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"""
    a = Engine(cfg, Model(spec))
    b = Engine(cfg, Model(spec))
    X = Float32[0.1 * (3i + j) - 0.5 for i in 0:3, j in 0:2]
    Y = Float32[0.2 * ((2i + k) % 3) for i in 0:3, k in 0:1]
    for _ in 1:3
        @test forward(a, X, Y) == forward(b, X, Y)
        backward!(a); step!(a)
        backward!(b); step!(b)
    end
    names = [p.name for p in named_parameters(a)]
    before = [get_full_fp32_param(a, n) for n in names]
    dir = mktempdir()
    offload_states!(a; include = [:optim_states, :hp_params, :lp_grads], device = :nvme, nvme_path = dir)
    eval!(a); eval!(b)
    @test forward(a, X, Y) == forward(b, X, Y)
    train!(a); train!(b)
    reload_states!(a)
    @test [get_full_fp32_param(a, n) for n in names] == before
    offload_states!(a; device = :nvme, nvme_path = dir)
    @test_throws DeepSpeedError forward(a, X, Y)
    reload_states!(a)
    empty_partition_cache!(a)
    @test forward(a, X, Y) == forward(b, X, Y)
    close(a); close(b)
end


@testset "pipeline stage calls on a world of one" begin
    # Not a stage: train_batch! / eval_batch / pipe_info are refused naming the pipeline,
    # and the engine stays usable. Two stages need two ranks: engine creation refuses them.
    # A bad pipeline object is refused by Model, naming its key.
    gpt(extra) = """{"type": "gpt", "vocab_size": 16, "block_size": 8, "n_layer": 2, "n_head": 2,
                     "n_embd": 16, "seed": 3$(extra)}"""
    cfg = """{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2,
              "optimizer": {"type": "AdamW", "params": {"lr": 0.01}}}"""
    refusal(f) = try
        f()
        nothing
    catch x
        x
    end
    e = Engine(cfg, Model(gpt("")))
    ids = Int32[(7 * (i + 8j) + 3) % 16 for i in 0:3, j in 0:7]   # (batch, T)
    tgt = Int32[(5 * (i + 8j) + 1) % 16 for i in 0:3, j in 0:7]
    for f in (() -> train_batch!(e, ids, tgt), () -> train_batch!(e, nothing, nothing),
              () -> eval_batch(e, ids, tgt), () -> pipe_info(e))
        err = refusal(f)
        @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_STATE
        @test err isa DeepSpeedError && occursin("not a pipeline stage", err.message)
    end
    loss = forward(e, ids[1:2, :], tgt[1:2, :])
    @test loss > 0 && loss < 100   # near log(16) at init
    backward!(e)
    @test !step!(e).stepped   # micro-step 1 of 2
    @test micro_steps(e) == 1
    close(e)

    m = Model(gpt(""", "pipeline": {"stages": 2, "partition_method": "parameters"}"""))
    err = refusal(() -> Engine(cfg, m))
    @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_ARGUMENT
    @test err isa DeepSpeedError && occursin("pipeline.stages", err.message)
    close(m)

    for (pipeline, key) in (("""{"stagez": 2}""", "pipeline.stagez"), ("""{"stages": 0}""", "pipeline.stages"))
        err = refusal(() -> Model(gpt(""", "pipeline": $(pipeline)""")))
        @test err isa DeepSpeedError && err.status == L.DS_ERR_INVALID_CONFIG
        @test err isa DeepSpeedError && occursin(key, err.message)
    end
end

end # testset
