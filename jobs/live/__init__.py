"""The live side as the pipeline sees it: what each group runs now (``status``)."""
