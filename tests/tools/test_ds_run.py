#!/usr/bin/env python3
"""Tests of tools/ds-run (the launcher): hostfile parsing and resource
selection through --dry-run (DEEPSPEED_SEMANTICS.md §14.1), the per-rank environment
(§14.2) with simulated mpirun/srun variables, and a real 2-rank local run.

usage: test_ds_run.py [path/to/ds-run]   (standard library unittest)
"""
import base64
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DS_RUN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "tools", "ds-run")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

HOSTFILE = """\
# a comment, then a blank line

worker-0 slots=4
worker-1 slots=4   trailing text is ignored
  worker-2 slots=2
"""


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMPI_", "PMI", "CUDA_VISIBLE", "OMP_NUM"))}
    env.update(extra)
    return env


def run_ds(args, env=None, cwd=None):
    return subprocess.run([sys.executable, DS_RUN] + args, capture_output=True, text=True,
                          env=env if env is not None else clean_env(), cwd=cwd)


class Launch:
    """A parsed --dry-run command: the launcher part and the wrapper part."""

    def __init__(self, stdout):
        self.argv = shlex.split(stdout.strip())
        idx = self.argv.index("--_rank-env")
        self.launcher = self.argv[:idx - 1]
        self.wrapper = self.argv[idx + 1:]
        sep = self.wrapper.index("--")
        self.program = self.wrapper[sep + 1:]
        self.options = dict(a[2:].split("=", 1) for a in self.wrapper[:sep])

    def world(self):
        return json.loads(base64.urlsafe_b64decode(self.options["world_info"]))

    def opt(self, flag):
        return self.launcher[self.launcher.index(flag) + 1] if flag in self.launcher else None


class DryRunBase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ds_run_test_")
        self.hostfile = os.path.join(self.tmp, "hostfile")
        with open(self.hostfile, "w") as f:
            f.write(HOSTFILE)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def dry(self, *args, env=None, cwd=None):
        r = run_ds(["--dry-run"] + list(args) + ["--", "prog", "-x", "1"], env=env, cwd=cwd)
        self.assertEqual(r.returncode, 0, r.stderr)
        launch = Launch(r.stdout)
        self.assertEqual(launch.program, ["prog", "-x", "1"])
        return launch

    def fails(self, *args, message, env=None):
        r = run_ds(["--dry-run"] + list(args) + ["--", "prog"], env=env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(message, r.stderr)


class HostfileAndFilters(DryRunBase):
    def test_hostfile_all_hosts(self):
        l = self.dry("-H", self.hostfile)
        self.assertEqual(l.world(), {"worker-0": [0, 1, 2, 3], "worker-1": [0, 1, 2, 3], "worker-2": [0, 1]})
        self.assertEqual(l.launcher[:3], ["mpirun", "-np", "10"])
        self.assertEqual(l.opt("-H"), "worker-0:4,worker-1:4,worker-2:2")
        self.assertEqual(l.options["master_addr"], "worker-0")
        self.assertEqual(l.options["master_port"], "29500")
        self.assertEqual(list(l.world()), ["worker-0", "worker-1", "worker-2"])

    def test_include(self):
        l = self.dry("-H", self.hostfile, "--include", "worker-0@worker-1:0,2")
        self.assertEqual(l.world(), {"worker-0": [0, 1, 2, 3], "worker-1": [0, 2]})
        self.assertEqual(l.opt("-np"), "6")
        self.assertEqual(l.opt("-H"), "worker-0:4,worker-1:2")

    def test_include_follows_hostfile_order_and_merges(self):
        l = self.dry("-H", self.hostfile, "-i", "worker-2:1@worker-0:3,1@worker-0:1")
        self.assertEqual(list(l.world().items()), [("worker-0", [1, 3]), ("worker-2", [1])])

    def test_exclude(self):
        l = self.dry("-H", self.hostfile, "--exclude", "worker-1:0@worker-2")
        self.assertEqual(l.world(), {"worker-0": [0, 1, 2, 3], "worker-1": [1, 2, 3]})
        l = self.dry("-H", self.hostfile, "-e", "worker-2:0,1")  # all slots gone -> host dropped
        self.assertEqual(list(l.world()), ["worker-0", "worker-1"])

    def test_num_nodes_and_num_gpus(self):
        self.assertEqual(list(self.dry("-H", self.hostfile, "--num_nodes", "2").world()), ["worker-0", "worker-1"])
        l = self.dry("-H", self.hostfile, "--num_gpus", "3")  # every host 0..G-1, even worker-2 (2 slots)
        self.assertEqual(l.world(), {"worker-0": [0, 1, 2], "worker-1": [0, 1, 2], "worker-2": [0, 1, 2]})
        l = self.dry("-H", self.hostfile, "--num_nodes", "1", "--num_accelerators", "2")
        self.assertEqual(l.world(), {"worker-0": [0, 1]})
        self.assertEqual(l.opt("-H"), "worker-0:2")  # one remote host: still launched there

    def test_selection_errors(self):
        hf = ["-H", self.hostfile]
        self.fails(*hf, "-i", "worker-9", message="host 'worker-9' is not in the hostfile")
        self.fails(*hf, "-i", "worker-2:2", message="host 'worker-2' has no slot 2")
        self.fails(*hf, "-e", "worker-0:7", message="host 'worker-0' has no slot 7")
        self.fails(*hf, "-i", "worker-0", "-e", "worker-1", message="mutually exclusive")
        self.fails(*hf, "-i", "worker-0", "--num_gpus", "1", message="cannot be combined")
        self.fails(*hf, "-e", "worker-0@worker-1@worker-2", message="no ranks left")
        self.fails(*hf, "-i", "worker-0:a", message="bad slot list")
        self.fails(*hf, "-n", "2", message="-n/--np is for local runs")
        self.fails("--num_nodes", "2", message="needs a hostfile")
        self.fails("-H", os.path.join(self.tmp, "missing"), message="does not exist")

    def test_bad_hostfiles(self):
        cases = {"worker-0 slots=2\nworker-0 slots=3\n": "listed twice",
                 "worker-0 slot=2\n": "bad entry",
                 "worker-0\n": "bad entry",
                 "# only a comment\n\n": "no '<host> slots=<count>' entries"}
        for text, message in cases.items():
            with open(self.hostfile, "w") as f:
                f.write(text)
            with self.subTest(text=text):
                self.fails("-H", self.hostfile, message=message)

    def test_master_and_launcher_args(self):
        l = self.dry("-H", self.hostfile, "--master_addr", "10.0.0.1", "--master_port", "1234",
                     "--launcher_args", "--mca btl ^openib")
        self.assertEqual(l.options["master_addr"], "10.0.0.1")
        self.assertEqual(l.options["master_port"], "1234")
        self.assertIn("--mca", l.launcher)
        self.assertEqual(l.launcher[l.launcher.index("--mca") + 1:l.launcher.index("--mca") + 3], ["btl", "^openib"])

    def test_exports_to_remote_hosts(self):
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        with open(os.path.join(home, ".deepspeed_env"), "w") as f:
            f.write("# comment\nFOO=bar=baz\n")
        env = clean_env(HOME=home, NCCL_DEBUG="INFO", DS_LOG_LEVEL="warn", OMP_NUM_THREADS="3", UNRELATED="x")
        l = self.dry("-H", self.hostfile, env=env, cwd=self.tmp)
        xs = [l.launcher[i + 1] for i, a in enumerate(l.launcher) if a == "-x"]
        for want in ("NCCL_DEBUG=INFO", "DS_LOG_LEVEL=warn", "OMP_NUM_THREADS=3", "FOO=bar=baz"):
            self.assertIn(want, xs)
        self.assertFalse(any(x.startswith("UNRELATED=") for x in xs))
        self.assertNotIn("omp_threads", l.options)  # user's OMP_NUM_THREADS wins


class HostileInput(DryRunBase):
    """Every bad input ends as 'ds-run: error: ...' with exit 2, never a traceback."""

    def write(self, data):
        with open(self.hostfile, "wb") as f:
            f.write(data)

    def no_traceback(self, r):
        self.assertNotIn("Traceback", r.stderr)

    def test_one_remote_host_is_launched_there(self):
        self.write(b"faraway-node slots=2\n")
        l = self.dry("-H", self.hostfile)
        self.assertEqual(l.opt("-H"), "faraway-node:2")
        self.assertEqual(l.options["master_addr"], "faraway-node")

    def test_one_local_host_needs_no_host_list(self):
        for name in ("localhost", "127.0.0.1", socket.gethostname()):
            self.write(f"{name} slots=2\n".encode())
            with self.subTest(name=name):
                self.assertIsNone(self.dry("-H", self.hostfile).opt("-H"))

    def fake_bin(self, with_ssh):
        """A PATH holding a fake mpirun that prints its arguments (and ssh if asked)."""
        bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        names = ["mpirun"] + (["ssh"] if with_ssh else [])
        for name in names:
            path = os.path.join(bin_dir, name)
            with open(path, "w") as f:
                f.write("#!/bin/sh\necho \"$0 $*\"\n")
            os.chmod(path, 0o755)
        return bin_dir

    def test_remote_host_without_ssh_is_refused(self):
        self.write(b"faraway-node slots=2\n")
        env = clean_env(PATH=self.fake_bin(with_ssh=False))
        r = run_ds(["-H", self.hostfile, "--", "prog"], env=env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("ds-run: error: host 'faraway-node' is not this machine and neither ssh nor rsh", r.stderr)
        self.assertEqual(r.stdout, "")  # mpirun was never started

    def test_remote_host_with_ssh_goes_through_the_host_list(self):
        self.write(b"faraway-node slots=2\n")
        env = clean_env(PATH=self.fake_bin(with_ssh=True))
        r = run_ds(["-H", self.hostfile, "--", "prog"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("-H faraway-node:2", r.stdout)  # what the (fake) mpirun was given

    def test_binary_and_unreadable_hostfiles(self):
        cases = {b"\x00\x01\x02slots=2\n": "not a text file",
                 b"worker-0 slots=2\n\xff\xfe\n": "not UTF-8 text (line 2",
                 b"w" * (1 << 20) + b" slots=1\n": "larger than"}
        for data, message in cases.items():
            self.write(data)
            with self.subTest(message=message):
                self.fails("-H", self.hostfile, message=message)
        self.fails("-H", self.tmp, message="is not a regular file")

    def test_bad_host_entries(self):
        cases = {b"worker-0 slots=99999999999999999999\n": "slots=99999999999999999999 is not in [1, 4096]",
                 b"worker-0 slots=5000\n": "is not in [1, 4096]",
                 b"worker-0 slots=0\n": "slots=0 is not in [1, 4096]",
                 b"a,b slots=2\n": "'a,b' is not a host name",
                 b"a:1 slots=2\n": "'a:1' is not a host name"}
        for data, message in cases.items():
            self.write(data)
            with self.subTest(message=message):
                self.fails("-H", self.hostfile, message=message)

    def test_huge_counts(self):
        self.fails("-n", "100000000000", message="more than 4096 ranks per host")
        self.fails("--num_gpus", "100000000000", message="more than 4096 ranks per host")
        self.fails("-H", self.hostfile, "-i", "worker-0:99999999999", message="bad slot list")
        self.fails("--num_nodes", "-5", message="must be > 0")
        self.fails("--master_port", "70000", message="not a TCP port")
        self.fails(env=clean_env(CUDA_VISIBLE_DEVICES="0,99999999999"), message="bad slot list")

    def test_bad_launcher_args(self):
        self.fails("--launcher_args", "--mca btl 'unclosed", message="--launcher_args: cannot split")
        self.fails("-n", "2", "--launcher_args=-np 8", message="'-np' conflicts with ds-run's resource selection")
        self.fails("-n", "2", "--launcher_args=--host=a,b", message="conflicts")

    def test_bad_environment_file(self):
        home = os.path.join(self.tmp, "home")
        os.mkdir(home)
        with open(os.path.join(home, ".deepspeed_env"), "wb") as f:
            f.write(b"A=\xff\n")
        self.fails("-H", self.hostfile, env=clean_env(HOME=home), message="not UTF-8 text")

    def test_bad_world_info_in_rank_mode(self):
        r = run_ds(["--_rank-env", "--world_info=!!notbase64", "--master_addr=m", "--master_port=1", "--", "true"],
                   env=clean_env(OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="1"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("ds-run: error: --world_info is not valid", r.stderr)
        self.no_traceback(r)

    def fails(self, *args, message, env=None):
        r = run_ds(["--dry-run"] + list(args) + ["--", "prog"], env=env)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("ds-run: error: ", r.stderr)
        self.assertIn(message, r.stderr)
        self.no_traceback(r)


@unittest.skipIf(os.path.exists("/job/hostfile"), "the default hostfile /job/hostfile exists here")
class LocalRuns(DryRunBase):
    def test_np(self):
        l = self.dry("-n", "2")
        self.assertEqual(l.world(), {"localhost": [0, 1]})
        self.assertEqual(l.launcher[:3], ["mpirun", "-np", "2"])
        self.assertIsNone(l.opt("-H"))
        self.assertEqual(l.options["master_addr"], "127.0.0.1")
        self.assertEqual(l.options["omp_threads"], "auto")
        self.assertEqual("--allow-run-as-root" in l.launcher, IS_ROOT)
        self.assertEqual(l.opt("--bind-to"), "none")

    def test_oversubscribe_only_beyond_cores(self):
        cores = len(os.sched_getaffinity(0))
        self.assertIn("--oversubscribe", self.dry("-n", str(cores + 1)).launcher)
        self.assertNotIn("--oversubscribe", self.dry("-n", "1").launcher)

    def test_cuda_visible_devices(self):
        l = self.dry(env=clean_env(CUDA_VISIBLE_DEVICES="1,3"))
        self.assertEqual(l.world(), {"localhost": [1, 3]})
        l = self.dry("-n", "2", env=clean_env(CUDA_VISIBLE_DEVICES="1,3"))  # ignored with -n
        self.assertEqual(l.world(), {"localhost": [0, 1]})

    def test_num_gpus_local(self):
        self.assertEqual(self.dry("--num_gpus", "3").world(), {"localhost": [0, 1, 2]})
        self.fails("-n", "2", "--num_gpus", "2", message="either -n/--np or --num_gpus")


class SlurmCommands(DryRunBase):
    def test_srun_with_uniform_hostfile(self):
        with open(self.hostfile, "w") as f:
            f.write("a slots=2\nb slots=2\n")
        l = self.dry("-H", self.hostfile, env=clean_env(SLURM_JOB_ID="42"))
        self.assertEqual(l.launcher[:3], ["srun", "-n", "4"])
        self.assertIn("--nodelist=a,b", l.launcher)
        self.assertIn("--ntasks-per-node=2", l.launcher)
        self.assertEqual(l.world(), {"a": [0, 1], "b": [0, 1]})

    def test_srun_needs_uniform_slots(self):
        self.fails("-H", self.hostfile, env=clean_env(SLURM_JOB_ID="42"), message="same number of slots")
        l = self.dry("-H", self.hostfile, "--launcher", "mpirun", env=clean_env(SLURM_JOB_ID="42"))
        self.assertEqual(l.launcher[0], "mpirun")

    def test_srun_without_hostfile_lets_slurm_place(self):
        l = self.dry("-n", "4", "--master_addr", "n1", env=clean_env(SLURM_JOB_ID="42"))
        self.assertEqual(l.launcher[:3], ["srun", "-n", "4"])
        self.assertNotIn("world_info", l.options)


class RankEnvironment(unittest.TestCase):
    """The per-rank wrapper, fed the variables mpirun/srun would set."""

    def rank_env(self, world, **launcher_vars):
        args = ["--_rank-env", "--master_addr=m", "--master_port=7"]
        if world is not None:
            args.append("--world_info=" + base64.urlsafe_b64encode(json.dumps(world).encode()).decode())
        args += ["--omp_threads=auto", "--", sys.executable, "-c",
                 "import os, json; print(json.dumps(dict(os.environ)))"]
        r = run_ds(args, env=clean_env(**launcher_vars))
        return r

    def ok(self, world, **launcher_vars):
        r = self.rank_env(world, **launcher_vars)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_openmpi_second_host(self):
        e = self.ok({"a": [0, 1, 2, 3], "b": [1, 3]}, OMPI_COMM_WORLD_RANK="5", OMPI_COMM_WORLD_SIZE="6",
                    OMPI_COMM_WORLD_LOCAL_SIZE="2", OMPI_COMM_WORLD_LOCAL_RANK="1")
        self.assertEqual((e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"], e["LOCAL_SIZE"]),
                         ("5", "6", "1", "2", "2"))
        self.assertEqual((e["CROSS_RANK"], e["CROSS_SIZE"], e["CUDA_VISIBLE_DEVICES"]), ("1", "2", "1,3"))
        self.assertEqual((e["MASTER_ADDR"], e["MASTER_PORT"]), ("m", "7"))
        cores = len(os.sched_getaffinity(0))
        self.assertEqual(e["OMP_NUM_THREADS"], str(max(1, cores // 2)))

    def test_local_rank_is_rank_mod_local_count(self):
        # Unequal hosts: rank 3 is the first rank on 'b' but LOCAL_RANK = 3 mod 2 = 1 (DeepSpeed's rule).
        e = self.ok({"a": [0, 1, 2], "b": [0, 1]}, OMPI_COMM_WORLD_RANK="3", OMPI_COMM_WORLD_SIZE="5")
        self.assertEqual((e["LOCAL_RANK"], e["LOCAL_SIZE"], e["CROSS_RANK"]), ("1", "2", "1"))

    def test_user_omp_threads_kept(self):
        e = self.ok({"a": [0]}, OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="1", OMP_NUM_THREADS="5")
        self.assertEqual(e["OMP_NUM_THREADS"], "5")

    def test_slurm_placement(self):
        e = self.ok(None, SLURM_PROCID="3", SLURM_NTASKS="4", SLURM_NODEID="1", SLURM_NNODES="2",
                    SLURM_TASKS_PER_NODE="2(x2)")
        self.assertEqual((e["RANK"], e["LOCAL_RANK"], e["LOCAL_SIZE"], e["CROSS_RANK"], e["CROSS_SIZE"]),
                         ("3", "1", "2", "1", "2"))
        e = self.ok(None, SLURM_PROCID="2", SLURM_NTASKS="3", SLURM_NODEID="1", SLURM_TASKS_PER_NODE="2,1")
        self.assertEqual((e["LOCAL_RANK"], e["LOCAL_SIZE"]), ("0", "1"))

    def test_errors(self):
        r = self.rank_env({"a": [0, 1]})
        self.assertEqual(r.returncode, 2)
        self.assertIn("not started by mpirun or srun", r.stderr)
        r = self.rank_env({"a": [0, 1]}, OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="3")
        self.assertIn("started 3 ranks but the resources hold 2", r.stderr)
        r = self.rank_env({"a": [0, 1], "b": [0, 1]}, OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="4",
                          OMPI_COMM_WORLD_LOCAL_SIZE="4")
        self.assertIn("placed 4 ranks on this host", r.stderr)


@unittest.skipUnless(shutil.which("mpirun"), "mpirun not installed")
@unittest.skipIf(os.path.exists("/job/hostfile"), "the default hostfile /job/hostfile exists here")
class RealLocalRun(unittest.TestCase):
    def test_two_ranks(self):
        # Each rank writes its own file: the ranks' stdout lines may interleave.
        out_dir = tempfile.mkdtemp(prefix="ds_run_ranks_")
        self.addCleanup(shutil.rmtree, out_dir)
        prog = ("import os, json, sys; open(os.path.join(sys.argv[1], 'rank%s.json' % os.environ['RANK']), 'w')"
                ".write(json.dumps({k: os.environ.get(k) for k in "
                "['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', "
                "'OMP_NUM_THREADS', 'OMPI_COMM_WORLD_RANK']}))")
        r = run_ds(["-n", "2", "--master_port", "29611", "--", sys.executable, "-c", prog, out_dir])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ds-run: cmd = mpirun -np 2", r.stderr)
        rows = []
        for name in sorted(os.listdir(out_dir)):
            with open(os.path.join(out_dir, name)) as f:
                rows.append(json.load(f))
        rows.sort(key=lambda d: int(d["RANK"]))
        self.assertEqual(len(rows), 2, os.listdir(out_dir))
        cores = len(os.sched_getaffinity(0))
        for i, row in enumerate(rows):
            self.assertEqual(row["RANK"], str(i))
            self.assertEqual(row["RANK"], row["OMPI_COMM_WORLD_RANK"])
            self.assertEqual(row["LOCAL_RANK"], str(i))
            self.assertEqual((row["WORLD_SIZE"], row["LOCAL_WORLD_SIZE"]), ("2", "2"))
            self.assertEqual((row["MASTER_ADDR"], row["MASTER_PORT"]), ("127.0.0.1", "29611"))
            self.assertEqual(row["OMP_NUM_THREADS"], str(max(1, cores // 2)))

    def test_exit_status_propagates(self):
        r = run_ds(["-n", "1", "--", sys.executable, "-c", "import sys; sys.exit(3)"])
        self.assertNotEqual(r.returncode, 0)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
