#!/bin/bash
# hpcgrade: grades runs from the spool with one warm harness
#SBATCH --job-name=hpcgrade-cs101
#SBATCH --comment="hpcgrade cs101 runs 7,8"
#SBATCH --wckey=cs101
#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --output=/shared/spool/jobs/%j.out
#SBATCH --open-mode=append
#SBATCH --requeue
#SBATCH --partition=gpu
#SBATCH --account=cs101
#SBATCH --qos=normal
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8192M
#SBATCH --time=45
#SBATCH --constraint=a100
#SBATCH --export=NONE
set -e
. /etc/profile
module load cuda/12.4
set -u
cd /shared/hpcgrade
exec env PYTHONPATH=/shared/hpcgrade /shared/course-venv/bin/python -m worker.harness spool /shared/spool 7 8
