"""Framework stores over any hybridsearch storage (API.md section 13), one module per framework,
each an optional extra: importing hybridsearch never imports a framework."""
