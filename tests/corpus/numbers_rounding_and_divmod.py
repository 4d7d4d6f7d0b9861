# expect: ok
seconds = 9876
hours, rest = divmod(seconds, 3600)
minutes, secs = divmod(rest, 60)
__result__ = {"hms": f"{hours:02d}:{minutes:02d}:{secs:02d}", "round_half": [round(0.5), round(1.5), round(2.675, 2)], "int_div": -7 // 2, "mod": -7 % 3}
