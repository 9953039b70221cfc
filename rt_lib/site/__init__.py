"""The companion site and what it shows: the pages built from executed notebooks
(:mod:`~rt_lib.site.pages`, its nbconvert template in ``template/``), the evidence kept from
finished runs (:mod:`~rt_lib.site.evidence`) and the explorers drawn in advance that work
without a kernel (:mod:`~rt_lib.site.static_explorers`).  Below the pipeline: nothing here
imports :mod:`rt_lib.pipeline` or the experiments."""
