"""A drop-in for pyspark.ml.torch.distributor.TorchDistributor, local mode, on air-run."""

import os
import warnings

from air import _binary, _launch


class TorchDistributor:
    """Runs a training function or script on N processes of this machine.

    Same constructor and ``run`` as Spark's TorchDistributor, without Spark:

    - ``run("train.py", "--lr=1e-3")`` runs the script once per process
      (air-run sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, ...) and returns
      None; keyword arguments are refused, as in Spark.
    - ``run(train_fn, *args, **kwargs)`` runs the function on every process and
      returns rank 0's return value.

    ``use_gpu=True`` clamps num_processes to the GPUs found, with a warning (as
    Spark does). Differences from Spark, each with a warning: with no GPU at
    all, ``use_gpu=True`` runs the processes on CPU instead of raising (so the
    same script runs in CPU CI); ``local_mode=False`` runs locally, since a
    plain machine has no Spark cluster. ``use_gpu=False`` hides the GPUs from
    the processes (CUDA_VISIBLE_DEVICES=""). Failures raise RuntimeError (for
    functions, air.DistributedError, a RuntimeError subclass). There is no
    timeout, as in Spark.
    """

    def __init__(self, num_processes=1, local_mode=True, use_gpu=True, _ssl_conf=None):
        if isinstance(num_processes, bool) or not isinstance(num_processes, int) \
                or num_processes <= 0:
            raise ValueError("num_processes has to be a positive integer")
        self.num_processes = num_processes
        self.local_mode = local_mode
        self.use_gpu = use_gpu
        if not local_mode:
            warnings.warn("TorchDistributor(local_mode=False) needs a Spark cluster; air-run "
                          "supports only local mode on a plain machine, so the %d processes "
                          "run on this machine" % num_processes, UserWarning, stacklevel=2)
        self._on_gpu = False
        if use_gpu:
            gpus = _binary.gpu_count(_binary.list_gpus(_binary.resolve_binary()))
            if gpus == 0:
                warnings.warn("TorchDistributor(use_gpu=True) but no GPU was found; running the "
                              "%d processes on CPU" % num_processes, UserWarning, stacklevel=2)
            else:
                self._on_gpu = True
                if num_processes > gpus:
                    warnings.warn("'num_processes' cannot be set to a value greater than the "
                                  "number of available GPUs on the driver, which is %d. "
                                  "'num_processes' was reset to be equal to the number of "
                                  "available GPUs." % gpus, RuntimeWarning, stacklevel=2)
                    self.num_processes = gpus

    def _placement(self):
        if self._on_gpu:
            return ["-n", str(self.num_processes)]
        return ["--accelerator-type", "CPU", "--cpu-ranks", str(self.num_processes)]

    def _extra_env(self):
        return {} if self.use_gpu else {"CUDA_VISIBLE_DEVICES": ""}

    def run(self, train_object, *args, **kwargs):
        """Runs a script path (returns None) or a function (returns rank 0's
        return value) on num_processes processes."""
        if isinstance(train_object, (str, os.PathLike)):
            if kwargs:
                raise ValueError("Running pytorch file does not support key-word type arguments.")
            return self._run_file(os.fspath(train_object), [str(a) for a in args])
        if not callable(train_object):
            raise TypeError("train_object must be a function or the path of a Python file, not "
                            "%r" % (train_object,))
        values = self._run_function(train_object, args, kwargs)
        return values[0] if values else None

    def _run_file(self, path, args):
        binary = _binary.resolve_binary()
        env = _launch.child_environment(dict(_launch.mlflow_environment(), **self._extra_env()))
        argv = [binary] + self._placement() + ["--timeout", "none",
                                               "--python", _launch.python_executable()]
        argv += [path] + args
        launch = _launch.run_air_run(argv, env)
        if launch.returncode == 0:
            return None
        if _launch.is_spec_error(launch):
            raise ValueError(_launch.spec_error_text(launch))
        tail = launch.output_tail[-100:]
        raise RuntimeError(
            "Command %s failed with return code %d. The last %d lines of the task output %s "
            "included below: %s" % (argv, launch.returncode, len(tail),
                                    "are" if len(tail) != 1 else "is", "\n".join(tail)))

    def _run_function(self, fn, args, kwargs):
        return _launch.call_on_ranks(
            fn, args, kwargs, what="function %s" % getattr(fn, "__qualname__", repr(fn)),
            num_ranks=self.num_processes, timeout=None, extra_env=self._extra_env(),
            placement=self._placement(), run_name=getattr(fn, "__name__", None))


__all__ = ["TorchDistributor"]
