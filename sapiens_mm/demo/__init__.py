"""Demos: the end-to-end ``make demo`` job (:mod:`~sapiens_mm.demo.pipeline`:
synthetic data, short trainings, evaluation, inference on real photos) and
the browser demo (:mod:`~sapiens_mm.demo.web`)."""
