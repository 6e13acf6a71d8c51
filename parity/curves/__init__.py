"""Layer 2: learning curves inside a band (docs/parity.md).

`cpu` (``python -m parity.curves``): the reference loop on CPU with each trainer's own
estimator and loss aggregation, against the band of the reference's seeds. `gpu`
(``python -m parity.curves.gpu command|run|collect``): every trainer's recipe on a GPU
runner, each trainer against the band of all the others.
"""
