#!/bin/bash
# hpcgrade: grades runs from the spool with one warm harness
#SBATCH --job-name=mpi-grading
#SBATCH --comment="MPI course 2026 batch TAG runs RUNS"
#SBATCH --wckey=mpi26
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --output=SPOOL/jobs/%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --partition=grading
#SBATCH --account=mpi-lab
#SBATCH --qos=teaching
#SBATCH --reservation=mpi-lab-tuesday
#SBATCH --cpus-per-task=2
#SBATCH --mem=4096M
#SBATCH --time=30
#SBATCH --signal=B:USR1@135
#SBATCH --export=NONE
set -e
until=$(( $(date +%s) + 1800 ))
set -u
cd CHECKOUT
exec env PYTHONPATH=CHECKOUT /shared/mpi-venv/bin/python -m worker.harness spool SPOOL RUNS --until "$until"
