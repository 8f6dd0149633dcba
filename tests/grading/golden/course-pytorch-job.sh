#!/bin/bash
# hpcgrade: grades runs from the spool with one warm harness
#SBATCH --job-name=hpcgrade-pytorch
#SBATCH --comment="hpcgrade pytorch batch TAG runs RUNS"
#SBATCH --wckey=pytorch
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --output=SPOOL/jobs/%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --account=dl-lab
#SBATCH --cpus-per-task=2
#SBATCH --mem=4096M
#SBATCH --time=30
#SBATCH --signal=B:USR1@135
#SBATCH --export=NONE
set -e
until=$(( $(date +%s) + 1800 ))
set -u
cd CHECKOUT
exec env PYTHONPATH=CHECKOUT /shared/course-venv/bin/python -m worker.harness spool SPOOL RUNS --until "$until"
