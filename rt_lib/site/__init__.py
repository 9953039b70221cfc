"""The companion site and what it shows: the pages built from executed notebooks
(:mod:`~rt_lib.site.pages`, its nbconvert template in ``template/``) and the evidence kept from
finished runs (:mod:`~rt_lib.site.evidence`); the notebooks' kernel-free explorers are figures,
drawn by :mod:`rt_lib.plots.static_explorers`.  Below the pipeline: nothing here imports
:mod:`rt_lib.pipeline`, the experiments, the figures or the analyses."""
