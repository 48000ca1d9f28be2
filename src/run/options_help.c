/* cdp_run --help: the text, with --model's names read from the table of
 * models. */
#include <stdio.h>
#include <string.h>
#include "models/model.h"
#include "run/options.h"

/* --model's names from the table of models, wrapped under the option */
static void print_model_names(FILE *f)
{
    const int indent = 25, width = 88;
    cdp_model_entry e;
    int n = 0;
    while (cdp_model_entry_at(n, &e))
        n++;
    int col = fprintf(f, "%*s", indent, "");
    for (int k = 0; k < n; k++) {
        cdp_model_entry_at(k, &e);
        int len = (int)strlen(e.name) + (k + 1 < n);
        if (col > indent && col + 1 + len > width)
            col = fprintf(f, "\n%*s", indent, "") - 1;
        else if (col > indent)
            col += fprintf(f, " ");
        col += fprintf(f, "%s%s", e.name, k + 1 < n ? "," : "");
    }
    fprintf(f, "\n");
}

void cdp_options_help(FILE *f)
{
    fputs(
"Usage: mpirun -np P cdp_run [options]     (or ./cdp_run for one rank)\n"
"Trains a network (MLP, ResNet or Vision Transformer) with Data Parallelism (dp) or\n"
"Cyclic Data Parallelism (cdp-v1, cdp-v2).\n"
"\n"
"Model and schedule:\n"
"  --model SPEC           network; --list-models says what each is [mlp:784-256-128-10]\n", f);
    print_model_names(f);
    fputs(
"  --stages L             contiguous runs of blocks, balanced by --balance\n"
"                         [mlp: one per Linear layer; ResNets and ViTs: 4]\n"
"  --balance B            what the stages balance: flops | activations (kept bytes)\n"
"                         [flops]\n"
"  --workers N            micro-batches per step (N >= ranks)    [max(4, ranks)]\n"
"  --batch B              samples per micro-batch                [32]\n"
"  --rule R               dp | cdp-v1 | cdp-v2                   [cdp-v2]\n"
"  --framework F          replicated | model-parallel | zero     [replicated]\n"
"  --deterministic        dp: sum gradients in worker order around the ring\n"
"                         instead of MPI_Allreduce (bitwise reproducible)\n"
"Training:\n"
"  --epochs E             passes over the training set           [10]\n"
"  --steps K              stop after K steps (overrides --epochs)\n"
"  --optimizer O          sgd (as torch.optim.SGD) | adamw (as torch.optim.AdamW) [sgd]\n"
"  --lr X                 learning rate             [sgd: 0.03; adamw: 0.001]\n"
"  --momentum X           SGD momentum (sgd only)                 [0.9]\n"
"  --betas B1,B2          AdamW's moment decays, each in [0, 1) (adamw only)\n"
"                                                                 [0.9,0.999]\n"
"  --eps X                AdamW's epsilon (adamw only)            [1e-8]\n"
"  --weight-decay X       sgd: L2 decay added to the gradient     [0]\n"
"                         adamw: decoupled, theta *= 1 - lr*X     [0.01]\n"
"  --lr-schedule S        step: multiply the lr by --lr-gamma every --lr-decay-epochs\n"
"                         epochs; cosine: lr*(1+cos(pi*c/(T-1)))/2 for update c of\n"
"                         the run's T steps, 0 at the last one    [step]\n"
"  --lr-decay-epochs E    step: multiply the lr by --lr-gamma every E epochs\n"
"                         (0: never)                              [3]\n"
"  --lr-gamma X           step: lr decay factor                   [0.5]\n"
"  --warmup-steps W       linear warm-up on either schedule: update c < W takes\n"
"                         the schedule's lr times (c+1)/W         [0]\n"
"  --seed S               initialisation and shuffling seed       [1]\n"
"  --no-shuffle           take the samples in file order 0,1,2,...\n"
"Data:\n"
"  --data KIND            fashion-mnist | mnist | cifar10 | synthetic   [fashion-mnist]\n"
"                         images 1x28x28 (Fashion-MNIST, MNIST), 3x32x32 (CIFAR-10)\n"
"  --data synthetic[:CxHxW][:n=TRAIN][:test=TEST]\n"
"                         synthetic images of any shape, e.g. synthetic:3x224x224\n"
"                         [the model's input; 784 = 1x28x28], TRAIN samples\n"
"                         [max(8192, capped to 256 MiB; workers x batch)], TEST [TRAIN/4]\n"
"  --data folder:DIR[:size=S][:resize=R][:bad=error|skip][...]\n"
"                         JPEG/PNG files in torchvision's ImageFolder layout:\n"
"                         DIR/train/CLASS/*, DIR/val/CLASS/*; training images\n"
"                         RandomResizedCrop(S) + flip, validation Resize(R) +\n"
"                         CenterCrop(S) [S 224, R S*256/224]; bad=skip leaves\n"
"                         damaged files out (counted) instead of stopping;\n"
"                         [:decoders=T][:prefetch=K]: T threads decode K steps\n"
"                         ahead [T --threads, K 2; K 0: when taken]\n"
"  --data-dir DIR         where the files are [per data set: /usr/share/datasets/KIND,\n"
"                         or $CDP_DATA_DIR/KIND when CDP_DATA_DIR is set; fashion-mnist\n"
"                         comes with the Debian package dataset-fashion-mnist]\n"
"  --augment LIST         training images only, as torchvision: crop=P (RandomCrop with\n"
"                         P zeros of padding), flip (RandomHorizontalFlip), or both:\n"
"                         crop=4,flip; drawn per (seed, epoch, sample)       [none]\n"
"  --normalize MEAN/STD   per channel after /255, as torchvision's Normalize, e.g.\n"
"                         0.4914,0.4822,0.4465/0.2470,0.2435,0.2616, or one value for\n"
"                         every channel: 0.5/0.5                               [none]\n"
"Files:\n"
"  --init-weights FILE    start from these weights (safetensors)\n"
"  --save-weights FILE    write the final weights (safetensors)\n"
"  --metrics FILE         JSON lines: one per epoch, then a summary\n"
"  --log-every K          also a --metrics line every K steps (\"log\": \"steps\")\n"
"  --trace FILE           Chrome trace of what each rank did when (chrome://tracing)\n"
"  --checkpoint FILE      write a checkpoint at the end and when SIGTERM or SIGINT\n"
"                         stops the run (see Exit status)\n"
"  --checkpoint-every E   also every E epochs\n"
"  --checkpoint-every-steps K\n"
"                         also after every K steps (after steps K, 2K, ...)\n"
"  --keep-checkpoints M   keep the last M checkpoints, named FILE.step-00000128 etc.;\n"
"                         1: one file, FILE, rewritten each time          [1]\n"
"  --resume FILE|latest   continue bit for bit from a checkpoint (any framework and\n"
"                         number of ranks); latest: the newest valid checkpoint of\n"
"                         --checkpoint FILE (FILE or FILE.step-*)\n"
"Execution:\n"
"  --backend B            cpu | cuda                               [cpu]\n"
"  --flush-denormals      CPU: denormal floats read and written as zero (as\n"
"                         torch.set_flush_denormal(True)): avoids the slow path some\n"
"                         CPUs take on them; other bits, deterministic all the same\n"
"  --precision P          fp32 | bf16: bfloat16 operands for the GEMMs and [fp32]\n"
"                         convolutions, every layer's output rounded to bfloat16;\n"
"                         float32 weights, gradients, optimizer (as torch.autocast)\n"
"  --allow-mixed-numerics run even when the ranks' builds or BLAS kernels differ\n"
"                         (hosts of two CPU generations): refused otherwise, as the\n"
"                         weights would be those of no single run; then a warning\n"
"                         says the run is not reproducible bit for bit\n"
"  --threads T            BLAS/OpenMP threads per rank\n"
"                         [$OMP_NUM_THREADS, else CPUs of the rank / ranks per node]\n"
"  --plan                 print the timeline, memory and traffic figures; do not train\n"
"  --plan-steps K         steps the --plan timeline shows (and --machine simulates) [2]\n"
"  --plan-ranks P         ranks --plan assumes                    [the job's]\n"
"  --machine FILE         --plan also predicts step time, samples/s, link load and\n"
"                         memory per rank on the machine FILE describes (reference 2.7)\n"
"  --device-memory SIZE   with --machine: whether a rank's memory fits in SIZE bytes\n"
"                         (suffix K, M, G, T: powers of 1024)\n"
"  --verify               also run the serial reference and report the largest difference\n"
"  --layer-times          time each layer's forward and backward, the loss and the\n"
"                         optimizer between backend syncs: a table at the end and\n"
"                         \"layer_times\" lines in --metrics; the same bits, a slower step\n"
"  --layer-times-out FILE --layer-times, and write them as a machine file for\n"
"                         --plan --machine (rank 0; edit its network part)\n"
"  --eval-every E         test-set evaluation every E epochs and at the end;\n"
"                         0: never                               [1]\n"
"  --quiet                only errors and, at the end, one line \"test_accuracy A\n"
"                         step_time_s T\" (A: none without an evaluation)\n"
"  --timeout S            watchdog, per wait: a rank whose wait in training for one\n"
"                         message or collective lasts S seconds asks the rank(s) it\n"
"                         waits on if they are alive; no answer within 2 s stops\n"
"                         the job with a line naming the rank and the instruction\n"
"                         waited on (see Exit status); 0: off      [600]\n"
"  --list-models          the models --model takes, with what each is, and exit\n"
"  --print-model          write the model (--model, on --data's images) as a\n"
"                         description file to stdout, --model FILE.json's format,\n"
"                         and exit\n"
"  --help, --version\n"
"Exit status:\n"
"  0 done; 1 an error (one line \"cdp_run: error: ...\" names it); 3 the run\n"
"  diverged: a training loss, the parameters or the optimizer state (checked every\n"
"  64 steps at most) or a test loss not finite; one error line says what to\n"
"  lower, and with --checkpoint the last good state (the last finite one checked)\n"
"  is the checkpoint written, never a non-finite state;\n"
"  4 the watchdog stopped the job (--timeout): a rank waited S seconds on a rank\n"
"  that did not answer; one line \"cdp_run: rank R: no progress for S s waiting on\n"
"  rank Q (INSTRUCTION of stage l, step k, tick t); rank Q does not answer ...\"\n"
"  names both, and mpirun ends every rank (a rank killed by a signal is seen by\n"
"  mpirun itself: it names the rank and exits 128 + the signal, 137 for SIGKILL);\n"
"  143 stopped by SIGTERM, 130 by SIGINT: every rank stops at the next segment\n"
"  boundary (every 64 steps at most), writes the checkpoint when\n"
"  --checkpoint is given, and rank 0 prints one line \"cdp_run: SIGTERM: stopped at\n"
"  step K of T, ...\"; a second signal ends the process at once.  Under mpirun, a\n"
"  signal sent to the ranks (any one of them) makes mpirun exit with that status\n"
"  too; a signal sent to mpirun itself (Ctrl-C) reaches the ranks as SIGTERM, and\n"
"  Open MPI 4.1's mpirun exits 1 and kills ranks still running after about a\n"
"  second (--mca odls_base_sigkill_timeout).\n", f);
}

