"""Reading results for people: plots, comparisons of runs, the HTML report and its palette."""
