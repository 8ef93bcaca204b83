"""What each page of the site shows, computed from the board and the submissions (no file is
written here): :mod:`~xaibench.site.views.overview` and :mod:`~xaibench.site.views.tracks` (the
overview page), :mod:`~xaibench.site.views.explainers` (one page per submission),
:mod:`~xaibench.site.views.methodology`, :mod:`~xaibench.site.views.correlations`; the verdicts
and table cells they share are in :mod:`~xaibench.site.views.cells`. Each view is a ``TypedDict``
the templates read."""
